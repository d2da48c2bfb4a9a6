# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: how the sanitizers of
# build-sanitize/ report, for the unit tests and the fuzzers alike.
# - abort_on_error: a finding ends the program with SIGABRT, which CTest and
#   libFuzzer both report as a failure, with the report on stderr.
# - detect_leaks: LeakSanitizer runs at exit. OpenBLAS's and libomp's
#   thread pools and buffers stay reachable from their globals (LSan reports
#   only unreachable blocks), and the unit label never initialises MPI
#   (test_comm runs with world size 1 outside mpirun; label mpi is not run
#   here). One leak inside COIN-OR's CoinUtils is suppressed
#   (scripts/lsan.supp, with its reason); any other leak report is a bug
#   to fix.
# - check_initialization_order: static initialisers that read another
#   file's globals before they are built.
# - quarantine_size_mb=16 (of 256): the milp policy solves in fork()ed
#   children (Note [CBC in a child process], scheduler/policies/cbc.h), and
#   a child inherits the quarantine and recycles it page by page, copying
#   each page it writes: with 256 MB Milp.EqualsExhaustiveSearchOnRandomGraphs
#   ran past 15 minutes, with 16 MB 23 s (in CI; 52 s on a loaded
#   machine). Freed blocks are still
#   poisoned until 16 MB of later frees push them out.
# - print_stacktrace: UBSan reports say where, not only what.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:quarantine_size_mb=16"
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lsan.supp"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
