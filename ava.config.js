// Tests run on the tsc output (type errors stop the run). workerThreads:false because
// the libpcap binding (live capture) aborts inside worker threads; see shared ecosystem notes.
export default { files: ['dist/test/**/*.test.js'], nodeArguments: ['--enable-source-maps'], workerThreads: false, timeout: '120s' };
