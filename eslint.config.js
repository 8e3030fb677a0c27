// `npm run lint`: ESLint's recommended rules and typescript-eslint's recommended rules over the
// TypeScript sources (tsc already checks types strictly; this catches what types do not).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'native/**/build/**', 'native/node_modules/**', 'test/lab/out/**', 'bench/out/**', '**/*.js', '**/*.cjs', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // Protocol code indexes typed arrays and maps it has just checked: `!` is deliberate there.
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Control characters are what the wire and terminals are made of (ANSI escapes, NUL padding).
      'no-control-regex': 'off',
      // Flags running-sum idioms (`u < (acc += p)`) and defaults overwritten on every path; tsc's
      // definite-assignment analysis already catches the real mistakes.
      'no-useless-assignment': 'off',
      // Tests match column-aligned tool output (tcpdump, tables): literal runs of spaces read better.
      'no-regex-spaces': 'off',
    },
  },
  {
    // Tests read the CLIs' JSON output, whose shape the assertions themselves check.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
