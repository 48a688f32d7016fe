"""The python graders' sandbox: user code, one call at a time, in a child that fails closed.

`runner.py` is the service's side (fair turns per user, the wall limit, the result read
strictly, leftovers reaped); `child.py` is the confined process, which imports only the
standard library and this package's `linux`, `confine`, `view`, `landlock` and `seccomp`,
since it is about to lose sight of every other file.
"""
