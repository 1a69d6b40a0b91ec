"""Hand-written LLVM IR kernels (opaque pointers) and their KernelSignatures for the tests.

Each kernel is a fixed text, written as the code generator would emit it; nothing is built by
string substitution. Imports runtime only.
"""

from runtime import ArgSpec, KernelSignature, ScalarSpec

# C[i] = A[i] + B[i] for i < n (float32).
ADD_LL = """
define i32 @add(ptr noalias %A, ptr noalias %B, ptr noalias %C, i32 %n) {
entry:
  %nonempty = icmp sgt i32 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %pa = getelementptr float, ptr %A, i32 %i
  %pb = getelementptr float, ptr %B, i32 %i
  %pc = getelementptr float, ptr %C, i32 %i
  %a = load float, ptr %pa, align 4
  %b = load float, ptr %pb, align 4
  %sum = fadd float %a, %b
  store float %sum, ptr %pc, align 4
  %next = add nsw i32 %i, 1
  %more = icmp slt i32 %next, %n
  br i1 %more, label %loop, label %exit
exit:
  ret i32 0
}
"""

ADD_SIGNATURE = KernelSignature(
    name="add",
    args=(
        ArgSpec("A", "float32", ("n",)),
        ArgSpec("B", "float32", ("n",)),
        ArgSpec("C", "float32", ("n",)),
    ),
    scalars=(ScalarSpec("n", "int32"),),
)

# Y[i] = expf(X[i]) for i < n, through libm.
EXP_LL = """
declare float @expf(float)

define i32 @exp_kernel(ptr noalias %X, ptr noalias %Y, i64 %n) {
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %px = getelementptr float, ptr %X, i64 %i
  %py = getelementptr float, ptr %Y, i64 %i
  %x = load float, ptr %px, align 4
  %y = call float @expf(float %x)
  store float %y, ptr %py, align 4
  %next = add nsw i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %exit
exit:
  ret i32 0
}
"""

EXP_SIGNATURE = KernelSignature(
    name="exp_kernel",
    args=(ArgSpec("X", "float32", ("n",)), ArgSpec("Y", "float32", ("n",))),
    scalars=(ScalarSpec("n", "int64"),),
)

# Y[i, j] = X[i, j] * 2 + W[j] for a float64 X of shape (m, 17) and W of shape (17,).
SCALE2D_LL = """
define i32 @scale2d(ptr noalias %X, ptr noalias %W, ptr noalias %Y, i64 %m) {
entry:
  %total = mul i64 %m, 17
  %nonempty = icmp sgt i64 %total, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %k = phi i64 [ 0, %entry ], [ %next, %loop ]
  %j = urem i64 %k, 17
  %px = getelementptr double, ptr %X, i64 %k
  %pw = getelementptr double, ptr %W, i64 %j
  %py = getelementptr double, ptr %Y, i64 %k
  %x = load double, ptr %px, align 8
  %w = load double, ptr %pw, align 8
  %twice = fmul double %x, 2.0
  %y = fadd double %twice, %w
  store double %y, ptr %py, align 8
  %next = add nsw i64 %k, 1
  %more = icmp slt i64 %next, %total
  br i1 %more, label %loop, label %exit
exit:
  ret i32 0
}
"""

SCALE2D_SIGNATURE = KernelSignature(
    name="scale2d",
    args=(
        ArgSpec("X", "float64", ("m", 17)),
        ArgSpec("W", "float64", (17,)),
        ArgSpec("Y", "float64", ("m", 17)),
    ),
    scalars=(ScalarSpec("m", "int64"),),
)

# Y[i] = M[i] ? X[i] : -1 with a bool mask (1 byte per element), int32 data, static size 37.
SELECT_LL = """
define i32 @select_kernel(ptr noalias %M, ptr noalias %X, ptr noalias %Y) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pm = getelementptr i8, ptr %M, i64 %i
  %px = getelementptr i32, ptr %X, i64 %i
  %py = getelementptr i32, ptr %Y, i64 %i
  %m = load i8, ptr %pm, align 1
  %x = load i32, ptr %px, align 4
  %set = icmp ne i8 %m, 0
  %y = select i1 %set, i32 %x, i32 -1
  store i32 %y, ptr %py, align 4
  %next = add nuw nsw i64 %i, 1
  %more = icmp ult i64 %next, 37
  br i1 %more, label %loop, label %exit
exit:
  ret i32 0
}
"""

SELECT_SIGNATURE = KernelSignature(
    name="select_kernel",
    args=(ArgSpec("M", "bool", (37,)), ArgSpec("X", "int32", (37,)), ArgSpec("Y", "int32", (37,))),
)

# A parallel loop as codegen emits it: the body is outlined into @fill_body, which reads its
# captured variables from a closure struct and takes iterations tid, tid + nt, ...; each
# element records its index and the thread that wrote it; thread 0 records the team size.
PARALLEL_LL = """
%closure = type { ptr, ptr, ptr, i32 }

declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()

define internal void @fill_body(ptr %data) {
entry:
  %out.p = getelementptr %closure, ptr %data, i32 0, i32 0
  %out = load ptr, ptr %out.p
  %owner.p = getelementptr %closure, ptr %data, i32 0, i32 1
  %owner = load ptr, ptr %owner.p
  %team.p = getelementptr %closure, ptr %data, i32 0, i32 2
  %team = load ptr, ptr %team.p
  %n.p = getelementptr %closure, ptr %data, i32 0, i32 3
  %n = load i32, ptr %n.p
  %tid = call i32 @omp_get_thread_num()
  %nt = call i32 @omp_get_num_threads()
  %has_work = icmp slt i32 %tid, %n
  br i1 %has_work, label %loop, label %after
loop:
  %i = phi i32 [ %tid, %entry ], [ %next, %loop ]
  %idx = sext i32 %i to i64
  %po = getelementptr i32, ptr %out, i64 %idx
  store i32 %i, ptr %po, align 4
  %pw = getelementptr i32, ptr %owner, i64 %idx
  store i32 %tid, ptr %pw, align 4
  %next = add nsw i32 %i, %nt
  %more = icmp slt i32 %next, %n
  br i1 %more, label %loop, label %after
after:
  %is_first = icmp eq i32 %tid, 0
  br i1 %is_first, label %record, label %done
record:
  store i32 %nt, ptr %team, align 4
  br label %done
done:
  ret void
}

define i32 @fill(ptr %out, ptr %owner, ptr %team, i32 %n) {
entry:
  %cl = alloca %closure, align 8
  %f0 = getelementptr %closure, ptr %cl, i32 0, i32 0
  store ptr %out, ptr %f0
  %f1 = getelementptr %closure, ptr %cl, i32 0, i32 1
  store ptr %owner, ptr %f1
  %f2 = getelementptr %closure, ptr %cl, i32 0, i32 2
  store ptr %team, ptr %f2
  %f3 = getelementptr %closure, ptr %cl, i32 0, i32 3
  store i32 %n, ptr %f3
  call void @GOMP_parallel(ptr @fill_body, ptr %cl, i32 0, i32 0)
  ret i32 0
}
"""

PARALLEL_SIGNATURE = KernelSignature(
    name="fill",
    args=(
        ArgSpec("out", "int32", ("n",)),
        ArgSpec("owner", "int32", ("n",)),
        ArgSpec("team", "int32", (1,)),
    ),
    scalars=(ScalarSpec("n", "int32"),),
)

# Returns status 7 when n > 3: stands in for a failed runtime check inside a kernel.
CHECKED_LL = """
define i32 @checked(ptr %X, i32 %n) {
entry:
  %bad = icmp sgt i32 %n, 3
  %status = select i1 %bad, i32 7, i32 0
  ret i32 %status
}
"""

CHECKED_SIGNATURE = KernelSignature(
    name="checked",
    args=(ArgSpec("X", "float32", ("n",)),),
    scalars=(ScalarSpec("n", "int32"),),
)

# A kernel with an int8 size variable: exercises the check that a size fits its dtype.
NARROW_LL = """
define i32 @narrow(ptr %X, i8 %n) {
entry:
  ret i32 0
}
"""

NARROW_SIGNATURE = KernelSignature(
    name="narrow",
    args=(ArgSpec("X", "uint8", ("n",)),),
    scalars=(ScalarSpec("n", "int8"),),
)
