/** The console's only stylesheet, served from the Worker (`GET /console/style.css`). */
export const CONSOLE_CSS = `
*{box-sizing:border-box}
body{font:1rem/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fff}
header{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:center;padding:.75rem 1.5rem;border-bottom:1px solid #d4d4d8;background:#fafafa}
header .brand{font-weight:700}
header nav{display:flex;flex-wrap:wrap;gap:1rem}
header form{margin-left:auto}
main{max-width:72rem;margin:0 auto;padding:1rem 1.5rem 3rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin:0 0 .5rem}
a{color:#1d4ed8}a:focus,button:focus,input:focus,select:focus,textarea:focus{outline:3px solid #f59e0b;outline-offset:2px}
.card{border:1px solid #d4d4d8;border-radius:6px;padding:1rem;margin:1rem 0}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.25rem 1rem;margin:.5rem 0}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.mono,code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
.digest{font-size:.85rem;overflow-wrap:anywhere}
pre{background:#f4f4f5;padding:.75rem;overflow:auto;font-size:.9rem;border-radius:4px;white-space:pre-wrap;overflow-wrap:anywhere}
pre .k{color:#7c2d12}pre .s{color:#065f46}pre .n{color:#1e40af}pre .b{color:#6b21a8}pre .z{color:#52525b}
mark.inv{background:#fde047;color:#000;border:1px solid #a16207;border-radius:3px;padding:0 .15rem;font-weight:700}
.effect{display:inline-block;padding:0 .5rem;border-radius:999px;font-weight:700;border:1px solid;white-space:nowrap}
.effect-read_only,.effect-creates_draft{background:#ecfdf5;color:#065f46}
.effect-external_write{background:#fffbeb;color:#92400e}
.effect-irreversible{background:#fef2f2;color:#991b1b}
.warn{border:2px solid #b45309;background:#fffbeb;padding:.75rem 1rem;border-radius:6px}
.error{border:2px solid #b91c1c;background:#fef2f2;padding:.75rem 1rem;border-radius:6px}
.ok{border:2px solid #15803d;background:#f0fdf4;padding:.75rem 1rem;border-radius:6px}
.decide{display:flex;flex-wrap:wrap;gap:1rem}
.decide form{flex:1 1 18rem;border:1px solid #d4d4d8;border-radius:6px;padding:1rem}
label{display:block;font-weight:600;margin:.5rem 0 .25rem}
input[type=text],input[type=password],select,textarea{width:100%;max-width:32rem;font:inherit;padding:.4rem;border:1px solid #71717a;border-radius:4px}
button{font:inherit;padding:.45rem 1rem;margin-top:.75rem;border-radius:4px;border:1px solid #1b1b1b;background:#fff;cursor:pointer}
button.primary{background:#1d4ed8;color:#fff;border-color:#1d4ed8}
button.danger{background:#b91c1c;color:#fff;border-color:#b91c1c}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}caption{text-align:left;font-weight:600;padding:.25rem 0}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}td,th{padding:.35rem .6rem;border-bottom:1px solid #e4e4e7;text-align:left;vertical-align:top;overflow-wrap:anywhere}
.pager{display:flex;gap:1rem;align-items:center;margin:1rem 0}
.steps{margin:0;padding-left:1.1rem}
.tabs{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0}
.tabs a[aria-current]{font-weight:700;text-decoration:none}
.muted{color:#52525b}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
@media (max-width:40rem){dl{grid-template-columns:minmax(0,1fr)}dt{margin-top:.5rem}main,header{padding-left:.75rem;padding-right:.75rem}table,thead,tbody,tr,td,th{display:block}thead{display:none}td{border:0;padding:.15rem 0}tr{border-bottom:1px solid #e4e4e7;padding:.5rem 0}}
@media (prefers-color-scheme:dark){body{background:#111;color:#eee}header{background:#18181b;border-color:#3f3f46}pre{background:#1f1f23}a{color:#93c5fd}.card,.decide form{border-color:#3f3f46}pre .k{color:#fdba74}pre .s{color:#6ee7b7}pre .n{color:#93c5fd}pre .b{color:#d8b4fe}pre .z{color:#a1a1aa}.muted{color:#a1a1aa}button{background:#27272a;color:#eee;border-color:#a1a1aa}.warn,.error,.ok{color:#1b1b1b}input[type=text],input[type=password],select,textarea{background:#18181b;color:#eee}}
`;
