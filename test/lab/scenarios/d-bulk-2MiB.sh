# (d) bulk transfer: 2 MiB + 123 bytes from A to B over one SMC-R connection (64 KiB RMB: the
# producer/consumer cursors wrap ~32 times; CDC carries the cursors, RDMA WRITEs the data).
PORT=12345
BYTES=$((2 * 1024 * 1024 + 123))
setup_rdma
both rdma-ready
pingpong_pair "after bulk" 1 -b $BYTES
finish
