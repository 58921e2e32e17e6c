# runnel — one flat Makefile. Settings first.
CC       ?= cc
BUILD    ?= build
DEBIAN_PACKAGES := lua5.4 liblua5.4-dev liblmdb-dev libmsgpack-dev lua-busted \
                   libreadline-dev libjansson-dev libsqlite3-dev sqlite3 pkg-config tmux
LUA      := lua5.4
LUA_INC  := $(shell pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
LUA_LIB  := $(shell pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4)
WARN     := -std=c11 -Wall -Wextra -Werror -Wshadow -Wundef -Wwrite-strings \
            -Wmissing-prototypes -Wstrict-prototypes
OPT      ?= -O2 -g
CFLAGS   += $(WARN) $(OPT) -fPIC -fvisibility=hidden -D_GNU_SOURCE -MMD -MP
CORE_LIBS := -llmdb -lmsgpackc -ljansson -lsqlite3
# JetStream (core/jetstream.c, core/js_source.c): nats.c, and the server for the cluster tests and demo
DEBIAN_PACKAGES += nats-server libnats-dev
CORE_LIBS += -lnats
SAN      := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

PREFIX   ?= /usr/local
VERSION  := $(shell sed -n 's/^\#define RN_VERSION "\(.*\)".*/\1/p' core/runnel.h)

CORE_SRC := $(wildcard core/*.c)
BIND_SRC := $(filter-out lua/cli.c,$(wildcard lua/*.c))
CTEST_SRC := $(wildcard spec/c/test_*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
BIND_OBJ := $(BIND_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/embedded.o
CTESTS   := $(CTEST_SRC:spec/c/%.c=$(BUILD)/spec/%)
ALL_LIBS := $(CORE_LIBS) $(LUA_LIB) -lm

.PHONY: all deps env test asan valgrind bench demo clean install
all: $(BUILD)/librunnel.a $(BUILD)/librunnel.so $(BUILD)/runnel.pc $(BUILD)/lua/runnel/core.so \
     $(BUILD)/runnel $(BUILD)/host $(CTESTS)

# Installs only what is missing; apt-get update runs only then.
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

env:
	@echo 'export LUA_PATH="$(CURDIR)/lua/?.lua;$${LUA_PATH:-;}"'
	@echo 'export LUA_CPATH="$(CURDIR)/$(BUILD)/lua/?.so;$${LUA_CPATH:-;}"'

# Every compiled file depends on the flags stamp: it holds the compiler and
# flags and is rewritten only when they change, so `make OPT=...` rebuilds
# everything instead of mixing objects built with different flags.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_TEXT   = $(CC) $(CFLAGS) $(LUA_INC) $(LDFLAGS)
$(FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@if [ x'$(FLAGS_TEXT)' != x"$$(cat $@ 2>/dev/null)" ]; then echo '$(FLAGS_TEXT)' > $@; fi

.PHONY: FORCE
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -c $< -o $@

# librunnel_core.a: the Lua-free core (the C tests link it); librunnel.a
# and librunnel.so: core and Lua binding, for hosts (pkg-config runnel).
$(BUILD)/librunnel_core.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/librunnel.a: $(CORE_OBJ) $(BIND_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/librunnel.so: $(CORE_OBJ) $(BIND_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,librunnel.so.0 -o $@ $^ $(ALL_LIBS) $(LDFLAGS)

PC_TEXT = 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: runnel\nDescription: a stream processor that lives inside a program\nVersion: %s\nRequires.private: lua5.4 lmdb msgpack jansson sqlite3 libnats\nLibs: -L$${libdir} -lrunnel\nLibs.private: -lm\nCflags: -I$${includedir}\n'

$(BUILD)/runnel.pc: Makefile
	@mkdir -p $(@D)
	@printf $(PC_TEXT) "$(PREFIX)" "$(VERSION)" > $@
# The version is read from core/runnel.h: a new version makes a new runnel.pc.
$(BUILD)/runnel.pc: core/runnel.h

$(BUILD)/lua/runnel/core.so: $(CORE_OBJ) $(BIND_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -o $@ $^ $(CORE_LIBS) $(LDFLAGS)

# The DSL is compiled into the CLI so the binary runs from anywhere.
EMBEDDED := runnel=lua/runnel.lua runnel.io=lua/runnel/io.lua runnel.view=lua/runnel/view.lua \
            runnel.repl=lua/repl.lua
EMBEDDED += runnel.state=lua/runnel/state.lua runnel.joiner=lua/runnel/joiner.lua \
            runnel.bytecode=lua/runnel/bytecode.lua runnel.lent=lua/runnel/lent.lua
$(BUILD)/gen/embedded.c: lua/runnel/state.lua lua/runnel/joiner.lua lua/runnel/bytecode.lua lua/runnel/lent.lua
$(BUILD)/gen/embedded.c: lua/runnel.lua lua/runnel/io.lua lua/runnel/view.lua lua/repl.lua scripts/embed.lua
	@mkdir -p $(@D)
	$(LUA) scripts/embed.lua $@ $(EMBEDDED)

$(BUILD)/gen/embedded.o: $(BUILD)/gen/embedded.c $(FLAGS_STAMP)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/runnel: $(BUILD)/lua/cli.o $(BUILD)/librunnel.a
	$(CC) $(CFLAGS) -o $@ $^ $(ALL_LIBS) -lreadline $(LDFLAGS)

# The example host links librunnel through runnel.h only, and builds as a
# host would: plain -std=c11, without the project's -D_GNU_SOURCE.
$(BUILD)/host: scripts/host/host.c core/runnel.h $(BUILD)/librunnel.a $(FLAGS_STAMP)
	$(CC) $(filter-out -D_GNU_SOURCE,$(CFLAGS)) -Icore -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) $(LDFLAGS)

# C tests link the core alone, except those that embed Lua (test_api, test_oom, test_capi_edges13, test_host_close_edges28).
$(BUILD)/spec/%: spec/c/%.c $(wildcard spec/c/*.h) $(BUILD)/librunnel_core.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel_core.a $(CORE_LIBS) $(LDFLAGS)

$(BUILD)/spec/test_api $(BUILD)/spec/test_oom $(BUILD)/spec/test_capi_edges13 $(BUILD)/spec/test_host_close_edges28: $(BUILD)/spec/%: spec/c/%.c $(wildcard spec/c/*.h) $(BUILD)/librunnel.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) $(LDFLAGS)

# test_durable_sync defines fsync, fdatasync and msync to count LMDB's syncs:
# exported, so that liblmdb's calls reach them.
$(BUILD)/spec/test_durable_sync: LDFLAGS += -rdynamic
$(BUILD)/spec/test_readers_remap26: LDFLAGS += -rdynamic

# jsctl: the JetStream chores of the cluster tests, demo and benchmark (nats.c, and the core for its server list)
all: $(BUILD)/jsctl
$(BUILD)/jsctl: scripts/cluster/jsctl.c $(BUILD)/librunnel_core.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icore -o $@ $< $(BUILD)/librunnel_core.a $(CORE_LIBS) -lm $(LDFLAGS)

# test_writeback embeds Lua too (its pipelines are declared by a Lua chunk).
$(BUILD)/spec/test_writeback: spec/c/test_writeback.c spec/c/check.h $(BUILD)/librunnel.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) $(LDFLAGS)

test: deps
	@$(MAKE) -s all
	@BUILD=$(BUILD) sh scripts/run-tests.sh

# Sanitized objects live in their own tree so they never mix with the others.
asan: deps
	@$(MAKE) -s all BUILD=build/asan OPT="-O1 -g $(SAN)" LDFLAGS="$(SAN)"
	@BUILD=build/asan ASAN=1 sh scripts/run-tests.sh

# The C tests under valgrind: no leaks, no invalid accesses. valgrind keeps
# test_oom's own malloc (it fails the Nth allocation) and replaces libc's.
valgrind: deps
	@$(MAKE) -s all
	@for t in $(CTESTS); do \
	  valgrind -q --soname-synonyms=somalloc=nouserintercepts --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 $$t || exit 1; \
	done

bench: deps
	@$(MAKE) -s all
	@sh scripts/bench/run.sh

demo: deps
	@$(MAKE) -s all
	@$(BUILD)/runnel run scripts/demo.lua

# ---- fuzz targets (fuzz/) ------------------------------------------------
# make test replays every saved input (fuzz/corpus and fuzz/regressions)
# through the targets linked with fuzz/replay.c by the usual compiler, so
# make asan replays them sanitized. make fuzz builds them with Debian's
# clang and libFuzzer in build/fuzz and fuzzes each for FUZZ_SECONDS.
FUZZ_TARGETS  := push ndjson json key row ops meta
FUZZ_SECONDS  ?= 60
FUZZ_PACKAGES := clang libclang-rt-dev
FUZZ_SAN      := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_REPLAYS  := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)

all: $(FUZZ_REPLAYS)
# Kept, not deleted as intermediates: the next build reuses them.
.SECONDARY: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%.o) $(BUILD)/fuzz/replay.o $(BUILD)/fuzz/state.o

$(BUILD)/fuzz/replay_%: $(BUILD)/fuzz/fuzz_%.o $(BUILD)/fuzz/replay.o $(BUILD)/fuzz/state.o $(BUILD)/librunnel.a
	$(CC) $(CFLAGS) -o $@ $^ $(ALL_LIBS) $(LDFLAGS)

$(BUILD)/fuzz/bin/%: $(BUILD)/fuzz/fuzz_%.o $(BUILD)/fuzz/state.o $(BUILD)/librunnel.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $^ $(ALL_LIBS) $(LDFLAGS)

.PHONY: fuzz
fuzz: deps
	@$(MAKE) -s deps DEBIAN_PACKAGES="$(FUZZ_PACKAGES)"
	@$(MAKE) -s BUILD=build/fuzz CC=clang OPT="-O1 -g $(FUZZ_SAN)" LDFLAGS="$(SAN)" \
	  $(FUZZ_TARGETS:%=build/fuzz/fuzz/bin/%)
	@sh fuzz/run.sh build/fuzz "$(FUZZ_SECONDS)" $(FUZZ_TARGETS)

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/runnel $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel
	install -m 644 core/runnel.h $(DESTDIR)$(PREFIX)/include/runnel.h
	install -m 644 $(BUILD)/librunnel.a $(DESTDIR)$(PREFIX)/lib/librunnel.a
	install -m 755 $(BUILD)/librunnel.so $(DESTDIR)$(PREFIX)/lib/librunnel.so.0
	ln -sf librunnel.so.0 $(DESTDIR)$(PREFIX)/lib/librunnel.so
	printf $(PC_TEXT) "$(PREFIX)" "$(VERSION)" > $(DESTDIR)$(PREFIX)/lib/pkgconfig/runnel.pc
	install -m 755 $(BUILD)/runnel $(DESTDIR)$(PREFIX)/bin/runnel
	install -m 755 $(BUILD)/lua/runnel/core.so $(DESTDIR)$(PREFIX)/lib/lua/5.4/runnel/core.so
	install -m 644 lua/runnel.lua $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel.lua
	install -m 644 lua/runnel/io.lua lua/runnel/view.lua $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/
	install -m 644 lua/runnel/state.lua lua/runnel/joiner.lua lua/runnel/bytecode.lua lua/runnel/lent.lua \
	  $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The crash campaign: N (default 1000) SIGKILLs of a writer at random
# points, each followed by a check of the state (scripts/crash/run.lua).
# CRASH_SINKS=0 leaves the NDJSON and SQLite sinks unchecked.
.PHONY: crash
crash: deps
	@$(MAKE) -s all
	@eval "$$($(MAKE) -s env)"; $(LUA) scripts/crash/run.lua $(or $(N),1000)

# The model campaign: random groups of changes (failing ones, rollbacks,
# batches, a failing sink, close and reopen) applied to a pipeline of tops,
# indexes, distincts, joins, windows, CDC images and sinks, each group
# checked against a plain-Lua model (spec/model10_campaign.lua; the same
# campaign, bounded, is spec/model10_spec.lua). N groups (default 2000) per
# seed, seeds SEED (default: the time) to SEED+SEEDS-1 (default 1 seed).
# The generator's version 11 (the default; MODEL_VERSION=10 replays the
# earlier one's seeds) adds p:run of NDJSON, attach reads, second opens,
# drops, and columns of the joins' tables and of the map changing.
.PHONY: model
model: deps
	@$(MAKE) -s all
	@eval "$$($(MAKE) -s env)"; $(LUA) scripts/model/run.lua $(or $(N),2000) $(SEED) $(SEEDS)

# The API-sequence campaign: random sequences of calls whose callbacks call
# runnel again, raise or collect (scripts/sequences/), under ASan and UBSan,
# each state verified at the end; N seeds (100) from SEED (1), STEPS calls
# (400) each. A failing seed prints the command that runs it again.
.PHONY: sequences
sequences: deps
	@$(MAKE) -s all BUILD=build/asan OPT="-O1 -g $(SAN)" LDFLAGS="$(SAN)"
	@sh scripts/sequences/run.sh build/asan $(or $(SEED),1) $$(( $(or $(SEED),1) + $(or $(N),100) - 1 )) $(or $(STEPS),400)

# ---- packaging (issue 15) --------------------------------------------------
# repl.lua is not installed as a module: it needs the runnel binary's
# runnel.readline, so the REPL is `runnel repl` (it is compiled in).
# The man page is made from `runnel help`, the one text of the usage.
DEBIAN_PACKAGES += luarocks
MAN_DATE := $(shell date -u -r core/runnel.h +%Y-%m-%d 2>/dev/null)
all: $(BUILD)/runnel.1
$(BUILD)/runnel.1: $(BUILD)/runnel scripts/man.lua
	$(BUILD)/runnel help | $(LUA) scripts/man.lua "$(VERSION)" "$(MAN_DATE)" > $@

.PHONY: install-man uninstall rock rock-install
install: install-man
install-man: $(BUILD)/runnel.1
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/runnel.1 $(DESTDIR)$(PREFIX)/share/man/man1/runnel.1

# Removes what install put there (and the repl.lua older installs left).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/runnel.h $(DESTDIR)$(PREFIX)/lib/librunnel.a \
	  $(DESTDIR)$(PREFIX)/lib/librunnel.so.0 $(DESTDIR)$(PREFIX)/lib/librunnel.so \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/runnel.pc $(DESTDIR)$(PREFIX)/bin/runnel \
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/runnel/core.so $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel.lua \
	  $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/io.lua $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/view.lua \
	  $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/state.lua $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/joiner.lua \
	  $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/bytecode.lua $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/lent.lua \
	  $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel/repl.lua $(DESTDIR)$(PREFIX)/share/man/man1/runnel.1
	-rmdir $(DESTDIR)$(PREFIX)/lib/lua/5.4/runnel $(DESTDIR)$(PREFIX)/share/lua/5.4/runnel 2>/dev/null

# luarocks make (runnel-*.rockspec, make backend): the module and its Lua
# files, into the directories LuaRocks gives (INST_LIBDIR, INST_LUADIR).
rock: $(BUILD)/lua/runnel/core.so
rock-install: rock
	install -d $(INST_LIBDIR)/runnel $(INST_LUADIR)/runnel
	install -m 755 $(BUILD)/lua/runnel/core.so $(INST_LIBDIR)/runnel/core.so
	install -m 644 lua/runnel.lua $(INST_LUADIR)/runnel.lua
	install -m 644 lua/runnel/io.lua lua/runnel/view.lua $(INST_LUADIR)/runnel/
	install -m 644 lua/runnel/joiner.lua lua/runnel/bytecode.lua lua/runnel/lent.lua $(INST_LUADIR)/runnel/

# The cluster demo (scripts/cluster/demo.lua): a 3-node JetStream cluster on
# 127.0.0.1 (data under build/cluster-demo), W workers, a worker and a node
# killed mid-run; ends with "cluster: W workers, N changes, equal to one
# process: yes|no" and stops everything it started.
.PHONY: cluster-demo cluster-kills
cluster-demo: deps
	@$(MAKE) -s all
	@eval "$$($(MAKE) -s env)"; $(LUA) scripts/cluster/demo.lua $(BUILD)

# The cluster spec with more kills than make test's 20 (CLUSTER_KILLS=N).
cluster-kills: deps
	@$(MAKE) -s all
	@eval "$$($(MAKE) -s env)"; CLUSTER_KILLS=$(or $(N),100) RUNNEL_BIN=$(CURDIR)/$(BUILD)/runnel \
	  $(LUA) "$$(command -v busted)" --filter='kill' spec/cluster_spec.lua

# test_read_derived embeds Lua too (a script declares the relations it reads from C).
$(BUILD)/spec/test_read_derived: spec/c/test_read_derived.c spec/c/check.h $(BUILD)/librunnel.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) $(LDFLAGS)

# test_notes embeds Lua too (a script's notes reach the host's callback).
$(BUILD)/spec/test_notes: spec/c/test_notes.c $(wildcard spec/c/*.h) $(BUILD)/librunnel.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) $(LDFLAGS)

# fkjoin_floor: fkjoin's LMDB calls alone, timed (scripts/bench/fkjoin_floor.c; make bench runs it)
all: $(BUILD)/fkjoin_floor
$(BUILD)/fkjoin_floor: scripts/bench/fkjoin_floor.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< -llmdb $(LDFLAGS)

# test_lua_errobj16 embeds Lua too (a host's script raises error objects).
$(BUILD)/spec/test_lua_errobj16: spec/c/test_lua_errobj16.c $(wildcard spec/c/*.h) $(BUILD)/librunnel.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) $(LDFLAGS)

# test_lua_procs drives one lua_State from two threads and a forked child: it embeds Lua too.
$(BUILD)/spec/test_lua_procs: spec/c/test_lua_procs.c $(wildcard spec/c/*.h) $(BUILD)/librunnel.a $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Icore -Ispec/c -o $@ $< $(BUILD)/librunnel.a $(ALL_LIBS) -lpthread $(LDFLAGS)
