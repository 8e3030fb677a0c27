// Kernel interop tests (qemu guests with Linux SMC-R, see docs/lab.md): `npm run test:interop`.
// Not part of `npm test` (its glob is dist/test/**/*.test.js; these are *.interop.ts, run with tsx).
// Serial: the guests need the machine's two cores. `timeout` is ava's inactivity timeout.
export default {
  files: ['test/interop/**/*.interop.ts'],
  extensions: { ts: 'module' },
  nodeArguments: ['--import=tsx', '--enable-source-maps'],
  workerThreads: false,
  serial: true,
  concurrency: 1,
  timeout: '15m',
};
