import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'target/',
      '.wrangler/',
      'src/worker-configuration.d.ts',
      'src/client/schema.d.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: 'error',
      // Control characters are matched on purpose: input validators reject them.
      'no-control-regex': 'off',
    },
  },
  {
    // The pure core: no Workers, Hono, drizzle, clock or network.
    files: ['src/core/**/*.ts', 'src/library/**/*.ts', 'src/lab/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['hono', 'hono/*'], message: 'src/core is pure: no Hono' },
            { group: ['drizzle-orm', 'drizzle-orm/*'], message: 'src/core is pure: no drizzle' },
            { group: ['cloudflare:*'], message: 'src/core is pure: no Workers APIs' },
            { group: ['node:*'], message: 'src/core is pure: no Node APIs' },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'fetch', message: 'src/core does no I/O' },
        { name: 'crypto', message: 'src/core takes randomness and digests from @noble/hashes or arguments' },
        { name: 'performance', message: 'src/core reads no clock' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'src/core reads no clock: time is passed in' },
        { object: 'Math', property: 'random', message: 'src/core is deterministic' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'src/core reads no clock',
        },
      ],
    },
  },
);
