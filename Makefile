# ppsched — build, test, run.
#
#   make            build build/ppsched (probes CUDA, cuBLAS, NCCL and libyaml first)
#   make run        build, then run schedules/1f1b.yaml (measured on the GPUs, simulated without)
#   make test       the include rules (mk/check_includes.sh), then the CPU tests always (with MPI,
#                   mpirun -np 2 and 4 on CPU: tests/check_mpi.sh; the README's transcripts:
#                   tests/check_docs.sh); GPU tests where a device is present (skipped with the
#                   reason)
#   make check-includes  who may include whom (docs/architecture.md), alone
#   make readme     re-run the README's checked transcripts and rewrite those that changed (make
#                   test fails on any difference: tests/check_docs.sh)
#   make test-asan  the CPU tests under AddressSanitizer + UBSan, then make fuzz
#   make fuzz       the config, CSV and profile readers under a bounded fuzz run (FUZZ_SECONDS=, per target)
#   make sanitize   the GPU tests (quick cases) under compute-sanitizer memcheck and racecheck
#                   (needs a GPU; about 8 min on one H100; SANITIZE_JOBS=, SANITIZE_TIMEOUT=)
#   make bench      benchmarks on the GPUs present (bench/); make bench-stage, bench-local,
#                   bench-overlap, bench-peer (SHAPE=7b: a model preset's shape; against PyTorch
#                   pipelining and Megatron-Core), bench-p2p (2 GPUs or more: one boundary on every
#                   transport and NCCL knob, then 1F1B and ZB-V on each transport setting), bench-dp
#                   (2 GPUs or more: every p x d split at one global batch, measured against the
#                   prediction)
#   make check-predict  the cost and memory model against measurement on the GPUs present (p = 4, 2
#                   or 1 of them): every kind at the reference and small models, m = 8 and 32, and
#                   one sequence per micro-batch; predicted against measured step, bubble and
#                   memory, a priori and with PROFILE= (default profiles/<gpu>.yaml); exits 1
#                   past the targets (bench/predict_check.sh; PREDICT_7B=1 adds the 7B-class
#                   shape's shipped files on 4 GPUs; `sh bench/predict_check.sh --from DIR`
#                   predicts a stored check's cases again, no GPU needed)
#   make install PREFIX=/usr/local  (ppsched, the schedules and the profiles they name)
#
# Options: CUDA_HOME=, NCCL_HOME=, MPI_HOME= (the MPI whose mpicc to use; MPI=off builds without
# MPI), SM=90 (GPU architecture), DEBUG=1 (no optimisation), CI=true (warnings are errors),
# CUDA=off (the CPU-only ppsched even where CUDA is installed; use its own BUILD=, e.g. make
# CUDA=off BUILD=build/nocuda). Without nvcc the build is CPU-only; without mpicc, single-process.

BUILD ?= build
SM ?= 90
PREFIX ?= /usr/local

-include $(BUILD)/config.mk

# MPI=off on the command line reaches the probe; config.mk's MPI (what the probe found) does not.
MPI_ASK := $(if $(filter command line,$(origin MPI)),$(MPI))

OPT := -O2
NVOPT := -O3
ifeq ($(DEBUG),1)
OPT := -O0
NVOPT := -O0 -G
endif

WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
ifeq ($(CI),true)
WARN += -Werror
endif

CC ?= cc
CFLAGS_CORE := -std=c11 -D_GNU_SOURCE -pthread $(OPT) -g $(WARN) -MMD -MP -I. $(YAML_CFLAGS)
CFLAGS_CUDA := $(CFLAGS_CORE) -Wno-strict-prototypes -I$(CUDA_INC) -I$(NCCL_INC) -DPP_WITH_NCCL
NVFLAGS = $(NVOPT) -g -lineinfo -std=c++17 -MMD -MP -I. -I$(NCCL_INC) -DPP_WITH_NCCL \
           $(NVARCH) -Xcompiler -Wall,-Wno-unused-parameter --expt-relaxed-constexpr
NVARCH := -gencode arch=compute_$(SM),code=[sm_$(SM),compute_$(SM)]
# The Hopper attention forward (warpgroup MMA, TMA) needs the architecture-specific sm_90a; built
# for another SM it compiles to a stub its launcher never takes.
ifeq ($(SM),90)
$(BUILD)/obj/kernels/flash_hopper.cu.o: NVARCH := -gencode arch=compute_90a,code=sm_90a -DPP_FLASH_HOPPER
endif
LIBS_CUDA := -L$(CUDA_LIB) -L$(NCCL_LIB) -Wl,-rpath,$(CUDA_LIB) -Wl,-rpath,$(NCCL_LIB) \
             -lcublasLt -lcublas -lnccl -lcudart
LIBS := $(YAML_LIBS) -lm -pthread

# Folders are the architecture (docs/architecture.md). The core is plain C built without CUDA
# headers: every .c file of the core folders below, but the MPI row of the process group. The
# executor (exec/, with nocuda.c its CPU-only stand-in), the stage and its kernels (stages/,
# kernels/) and the command line (cli/) are not part of it. Every folder includes by the path from
# the repository's root ("model/cost.h"); mk/check_includes.sh checks who may include whom.
CORE_DIRS := common model plan sim schedule config report run
CORE_SRC := $(filter-out common/mpi_%.c, $(wildcard $(addsuffix /*.c,$(CORE_DIRS))))
GPU_C_SRC := $(filter-out exec/nocuda.c, $(wildcard kernels/*.c stages/*.c exec/*.c))
GPU_CU_SRC := $(wildcard kernels/*.cu stages/*.cu exec/*.cu)
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)

# The MPI row of the process group (common/pp_group.h): mpi_group.c where mpicc was found, else
# mpi_none.c. Linked into ppsched, the GPU tests and the benchmarks, never into the core.
ifeq ($(MPI),on)
MPI_OBJ := $(BUILD)/obj/common/mpi_group.o
LIBS_MPI := $(MPI_LIBS) -Wl,-rpath,$(patsubst -L%,%,$(filter -L%,$(MPI_LIBS)))
else
MPI_OBJ := $(BUILD)/obj/common/mpi_none.o
LIBS_MPI :=
endif
GPU_OBJ := $(GPU_C_SRC:%.c=$(BUILD)/obj/%.o) $(GPU_CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)

CPU_TESTS := $(patsubst tests/cpu/%.c,$(BUILD)/tests/cpu/%,$(wildcard tests/cpu/test_*.c))
GPU_TESTS := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/test_*.c)) \
             $(patsubst tests/gpu/%.cu,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/test_*.cu))
# Test support code: tests/ref/*.c (CPU references in double precision, plain C, linked into every
# test), and tests/cpu/*.c, tests/gpu/*.c that are not test_* (linked into that folder's tests).
REF_LIB := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/ref/*.c))
CPU_TEST_LIB := $(REF_LIB) $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out tests/cpu/test_%,$(wildcard tests/cpu/*.c)))
GPU_TEST_LIB := $(REF_LIB) $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out tests/gpu/test_%,$(wildcard tests/gpu/*.c)))

BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/bench_*.c)) \
             $(patsubst bench/%.cu,$(BUILD)/bench/%,$(wildcard bench/bench_*.cu))
# Benchmark support code: bench/*.c that are not bench_* (linked into every benchmark).
BENCH_LIB := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out bench/bench_%,$(wildcard bench/*.c)))

# Everything links with the C++ driver (nvcc-built objects need libstdc++ and cudart).
CXX_LINK ?= g++
LINK := $(CXX_LINK)

# CPU-only: the executor is exec/nocuda.c (every GPU command says ppsched was built without
# CUDA), no GPU tests or benchmarks, linked by the C compiler.
ifeq ($(CUDA),off)
CFLAGS_CUDA := $(CFLAGS_CORE)
GPU_OBJ := $(BUILD)/obj/exec/nocuda.o
GPU_TESTS :=
BENCH_BIN :=
LIBS_CUDA :=
LINK := $(CC)
endif

.PHONY: all run check-includes readme test test-cpu test-gpu test-asan test-cpu-asan sanitize fuzz bench bench-stage bench-attention bench-local bench-overlap bench-peer bench-p2p bench-dp check-predict install clean distclean format probe
.DEFAULT_GOAL := all
.SECONDARY:

all: $(BUILD)/ppsched

$(BUILD)/config.mk: mk/probe.sh
	@CUDA=$(CUDA) MPI=$(MPI_ASK) sh mk/probe.sh $@

probe:
	@rm -f $(BUILD)/config.mk && CUDA=$(CUDA) MPI=$(MPI_ASK) sh mk/probe.sh $(BUILD)/config.mk

$(BUILD)/libppcore.a: $(CORE_OBJ)
	@mkdir -p $(@D)
	ar rcs $@ $^

$(BUILD)/libppgpu.a: $(GPU_OBJ)
	@mkdir -p $(@D)
	ar rcs $@ $^

# The core builds without CUDA headers; every other C file may use them.
$(CORE_OBJ): $(BUILD)/obj/%.o: %.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CORE) -c $< -o $@

$(BUILD)/obj/common/mpi_%.o: common/mpi_%.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CORE) $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/obj/tests/ref/%.o: tests/ref/%.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CORE) -c $< -o $@

$(BUILD)/obj/tests/cpu/%.o: tests/cpu/%.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CORE) -c $< -o $@

$(BUILD)/obj/%.o: %.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CUDA) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/ppsched: $(CLI_OBJ) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a
	$(LINK) -o $@ $^ $(LIBS_CUDA) $(LIBS_MPI) $(LIBS)

run: $(BUILD)/ppsched
	$(BUILD)/ppsched schedules/1f1b.yaml

# --- tests -------------------------------------------------------------------------------------
$(BUILD)/tests/cpu/%: tests/cpu/%.c $(CPU_TEST_LIB) $(BUILD)/libppcore.a $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CORE) $< $(CPU_TEST_LIB) $(BUILD)/libppcore.a -o $@ $(LIBS)

$(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.o $(GPU_TEST_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a
	@mkdir -p $(@D)
	$(CXX_LINK) $< $(GPU_TEST_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a -o $@ $(LIBS_CUDA) $(LIBS_MPI) $(LIBS)

$(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.cu.o $(GPU_TEST_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a
	@mkdir -p $(@D)
	$(CXX_LINK) $< $(GPU_TEST_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a -o $@ $(LIBS_CUDA) $(LIBS_MPI) $(LIBS)

# The README's transcripts of commands that need no GPU, run again with this build's ppsched and
# rewritten where their output changed (tests/check_docs.sh says how they are marked).
readme: $(BUILD)/ppsched
	@PP_BUILD=$(BUILD) sh tests/check_docs.sh --write

# The include rules come first: a violation fails `make test` with the others' results still shown.
check-includes:
	@sh mk/check_includes.sh

# bench_p2p is built for its command line's checks (tests/check_bench_p2p.sh), where CUDA is.
test: $(BUILD)/ppsched $(CPU_TESTS) $(GPU_TESTS) $(filter %/bench_p2p,$(BENCH_BIN))
	@PP_BUILD=$(BUILD) PP_MPI=$(MPI) PP_MPIRUN=$(MPIRUN) sh tests/run_tests.sh $(BUILD) \
	    mk/check_includes.sh tests/check_include_rules.sh $(CPU_TESTS) \
	    tests/check_install.sh tests/check_cli.sh tests/check_docs.sh tests/check_mpi.sh \
	    tests/check_sanitize_split.sh tests/check_bench_p2p.sh tests/check_bench_shape.sh \
	    tests/check_bench_peer.sh tests/check_bench_predict.sh -- $(GPU_TESTS) \
	    $(if $(GPU_TESTS),tests/check_mpi_gpu.sh)

test-cpu: $(CPU_TESTS)
	@sh tests/run_tests.sh $(BUILD) $(CPU_TESTS) --

test-gpu: $(BUILD)/ppsched $(GPU_TESTS)
	@PP_BUILD=$(BUILD) PP_MPI=$(MPI) PP_MPIRUN=$(MPIRUN) sh tests/run_tests.sh $(BUILD) -- \
	    $(GPU_TESTS) tests/check_mpi_gpu.sh

# The CPU tests again, built with AddressSanitizer and UBSan into their own tree.
test-asan: $(BUILD)/config.mk
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer" \
	    LDFLAGS_EXTRA=-fsanitize=address,undefined test-cpu-asan
	@$(MAKE) --no-print-directory fuzz

test-cpu-asan: $(CPU_TESTS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    sh tests/run_tests.sh $(BUILD) $(CPU_TESTS) --

# compute-sanitizer over every GPU test program, memcheck and racecheck, in bounded time
# (mk/sanitize.sh says how and what passes). Needs a GPU; SANITIZER= names the tool where it is
# not under CUDA_HOME or PATH.
SANITIZER ?= $(firstword $(wildcard $(CUDA_HOME)/bin/compute-sanitizer) $(shell command -v compute-sanitizer 2>/dev/null))
sanitize: $(GPU_TESTS)
	@sh mk/sanitize.sh "$(SANITIZER)" $(GPU_TESTS)

ifneq ($(LDFLAGS_EXTRA),)
LIBS += $(LDFLAGS_EXTRA)
endif

# --- fuzzing -----------------------------------------------------------------------------------
# Three targets from tests/fuzz/fuzz_readers.c (the YAML config reader, the CSV reader, the profile
# reader) over the core, built with ASan and UBSan: with libFuzzer where clang is present, else
# with the bounded mutation driver tests/fuzz/fuzz_main.c. `make fuzz` replays the seeds (every
# shipped YAML, CSV and profile, and tests/data/fuzz/, which keeps the inputs that once broke a
# reader), then fuzzes each target for FUZZ_SECONDS. `make test-asan` runs it, so CI does.
FUZZ_SECONDS ?= 20
FUZZ_CLANG := $(shell command -v clang 2>/dev/null)
ifneq ($(FUZZ_CLANG),)
FUZZ_CC := $(FUZZ_CLANG)
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LINK := -fsanitize=fuzzer,address,undefined
FUZZ_MAIN :=
else
FUZZ_CC := $(CC)
FUZZ_SAN := -fsanitize=address,undefined
FUZZ_LINK := $(FUZZ_SAN)
FUZZ_MAIN := tests/fuzz/fuzz_main.c
endif
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all \
               $(WARN) -MMD -MP -I. $(YAML_CFLAGS) $(FUZZ_SAN)
FUZZ_OBJ := $(CORE_SRC:%.c=$(BUILD)/fuzz/obj/%.o)

$(BUILD)/fuzz/obj/%.o: %.c $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(BUILD)/fuzz/fuzz_config: tests/fuzz/fuzz_readers.c $(FUZZ_MAIN) $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LINK) tests/fuzz/fuzz_readers.c $(FUZZ_MAIN) $(FUZZ_OBJ) -o $@ $(YAML_LIBS) -lm -pthread

$(BUILD)/fuzz/fuzz_csv: tests/fuzz/fuzz_readers.c $(FUZZ_MAIN) $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LINK) -DFUZZ_CSV tests/fuzz/fuzz_readers.c $(FUZZ_MAIN) $(FUZZ_OBJ) -o $@ $(YAML_LIBS) -lm -pthread

$(BUILD)/fuzz/fuzz_profile: tests/fuzz/fuzz_readers.c $(FUZZ_MAIN) $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LINK) -DFUZZ_PROFILE tests/fuzz/fuzz_readers.c $(FUZZ_MAIN) $(FUZZ_OBJ) -o $@ $(YAML_LIBS) -lm -pthread

fuzz: $(BUILD)/fuzz/fuzz_config $(BUILD)/fuzz/fuzz_csv $(BUILD)/fuzz/fuzz_profile
	@sh tests/fuzz/run_fuzz.sh $(BUILD)/fuzz $(FUZZ_SECONDS)

# --- benchmarks --------------------------------------------------------------------------------
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BENCH_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a
	@mkdir -p $(@D)
	$(CXX_LINK) $< $(BENCH_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a -o $@ $(LIBS_CUDA) $(LIBS_MPI) $(LIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.cu.o $(BENCH_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a
	@mkdir -p $(@D)
	$(CXX_LINK) $< $(BENCH_LIB) $(MPI_OBJ) $(BUILD)/libppgpu.a $(BUILD)/libppcore.a -o $@ $(LIBS_CUDA) $(LIBS_MPI) $(LIBS)

# SHAPE= picks the model presets (model/preset.c) bench-stage and bench-peer measure: one name
# (SHAPE=7b) or, for bench-stage, a comma-separated list; empty: each one's defaults (reference
# and small).
SHAPE ?=
bench-attention: $(BUILD)/bench/bench_attention
	$(BUILD)/bench/bench_attention $(if $(SHAPE),--shape $(SHAPE))

bench-stage: $(BUILD)/bench/bench_stage
	$(BUILD)/bench/bench_stage $(if $(SHAPE),--shape $(SHAPE))

# Host-link copies for activation offload: pinned against pageable, alone and under compute.
bench-offload: $(BUILD)/bench/bench_offload
	$(BUILD)/bench/bench_offload

# What the local transport's boundary copy costs (docs/architecture.md, "local").
bench-local: $(BUILD)/bench/bench_local
	$(BUILD)/bench/bench_local

# Whether DualPipeV's overlapped pair runs faster on two streams than on one (bench/bench_overlap.cu).
bench-overlap: $(BUILD)/bench/bench_overlap
	$(BUILD)/bench/bench_overlap

bench: $(BUILD)/ppsched $(BENCH_BIN)
	@sh bench/run_bench.sh $(BUILD)

# ppsched next to its peers: the whole model on one GPU against eager and torch.compile, then the
# pipelines against torch.distributed.pipelining and Megatron-Core's 1F1B and interleaved on the
# same GPUs, AdamW in every step (needs torch + torchrun; Megatron-Core where python3 imports it,
# else the table says how to carry it). PEER=one-gpu runs the one-GPU part alone, PEER=pipelines
# the pipelines alone, PEER=megatron ppsched and Megatron-Core alone; SHAPE=7b runs the pipelines
# at that preset; PEER_WHEELS=DIR installs the wheels `sh bench/peer_wheels.sh DIR` downloaded
# (on a machine with network) for the run; PEER_OPTIMIZER=none drops AdamW on every side
# (bench/run_peer.sh).
PEER ?= all
bench-peer: $(BUILD)/ppsched
	@PEER=$(PEER) SHAPE=$(SHAPE) sh bench/run_peer.sh $(BUILD)

# One boundary's transfer on every transport and NCCL knob (latency, rate, the slowdown of a GEMM
# beside it: bench/bench_p2p.cu), then 1F1B and ZB-V on each transport setting side by side, with
# the simulator's prediction of each (bench/run_p2p.sh). Needs 2 GPUs or more.
bench-p2p: $(BUILD)/ppsched $(BUILD)/bench/bench_p2p
	@sh bench/run_p2p.sh $(BUILD)

# Pipeline x data parallelism (bench/run_dp.sh): every p x d split of the GPUs present at one
# global batch, 1F1B and ZB-H1, measured against the prediction, and the splits' ranking.
bench-dp: $(BUILD)/ppsched
	@sh bench/run_dp.sh $(BUILD)

# The prediction check (bench/predict_check.sh): measured runs against the model's predictions, a
# priori and with the profile PROFILE (empty: profiles/<gpu>.yaml), checked against the targets.
PROFILE ?=
check-predict: $(BUILD)/ppsched
	@sh bench/predict_check.sh $(BUILD) $(PROFILE)

# --- housekeeping ------------------------------------------------------------------------------
# The schedules and the measured profiles side by side, as in the tree: a schedule's
# `profile: ../profiles/h100.yaml` finds the installed profile.
install: $(BUILD)/ppsched
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/ppsched/schedules \
	    $(DESTDIR)$(PREFIX)/share/ppsched/profiles
	install -m 755 $(BUILD)/ppsched $(DESTDIR)$(PREFIX)/bin/ppsched
	install -m 644 schedules/*.yaml schedules/*.csv $(DESTDIR)$(PREFIX)/share/ppsched/schedules/
	install -m 644 profiles/*.yaml profiles/README.md $(DESTDIR)$(PREFIX)/share/ppsched/profiles/

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD)/obj $(BUILD)/tests $(BUILD)/bench $(BUILD)/asan $(BUILD)/*.a $(BUILD)/ppsched

distclean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/fuzz $(BUILD)/tests -name '*.d' 2>/dev/null)
