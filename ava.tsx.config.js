// Fast loop without a build: `npx ava --config ava.tsx.config.js test/wire/clc.test.ts`
export default { files: ['test/**/*.test.ts'], extensions: { ts: 'module' }, nodeArguments: ['--import=tsx', '--enable-source-maps'], workerThreads: false, timeout: '120s' };
