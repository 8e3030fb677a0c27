// `npm run test:hostile-long`: the hostile flood (2000 concurrent connects) and the 60 s soak
// (also in `npm test`); see docs/endpoint.md for what the flood still shows.
export default { files: ['dist/test/hostile/flood.test.js', 'dist/test/hostile/soak.test.js'], nodeArguments: ['--enable-source-maps'], workerThreads: false, timeout: '180s' };
