// `npm run test:hostile-long`: the hostile flood (2000 concurrent connects) and the 60 s soak
// with 1 % loss, duplication and reordering; see docs/endpoint.md for why not in `npm test`.
// One file at a time (concurrency 1): the flood's burst beside the soak stalls the soak's processes
// past the QP retry budget, and the soak's link group ends (docs/endpoint.md).
export default { files: ['dist/test/hostile/flood.test.js', 'dist/test/hostile/soak.test.js'], nodeArguments: ['--enable-source-maps'], workerThreads: false, timeout: '180s', concurrency: 1 };
