// Vite's `?raw` suffix imports a file's text verbatim; tests use it for byte-exact vectors.
declare module '*?raw' {
  const text: string;
  export default text;
}
