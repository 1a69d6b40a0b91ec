"""tvm.contrib: cc (create_shared) and utils (tempdir), the helpers TVM's tutorials import."""
