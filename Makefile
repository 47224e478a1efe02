# SPDX-License-Identifier: Apache-2.0
# shutterd: build, install, check.
#
#   make                      build the three programs (release, standing alone) and the units
#   make deb                  the Debian packages shutterd and shutterd-mqtt, in .build/deb
#                             (docs/PACKAGING.md); make check-deb runs lintian on them
#   make dsc                  the source package they rebuild from, in .build/deb
#   make repo                 a signed apt repository of them, in .build/repo (make deb and
#                             make dsc first; docs/PACKAGING.md)
#   make install              install under PREFIX (default /usr/local)
#   make install PREFIX=/usr DESTDIR=/tmp/pkg   staged install for packaging
#   make post-install         create the user, reload systemd and udev (root,
#                             DESTDIR empty)
#   make uninstall            stop and disable the units, remove what install put
#                             there (files and the directories it created), reload
#   make check                check-units, check-rules, check-man, check-install,
#                             check-format (swift format lint), check-door (only the
#                             platform modules call C: scripts/check-c-door), check-licence
#                             (Apache-2.0 everywhere: scripts/check-licence)
#   make check-systemd        boot Debian 12 and Debian 13 with systemd under qemu and check
#                             the README's install, the units, uninstall and the packages
#                             from the signed repository (root; slow)
#   make check-rig-release    the kernel rig on Debian 13's kernel (6.12) and bluetoothd
#                             (BlueZ 5.82): the device checks and the scenarios (root)
#   make run                  set up, build and run shutterd in the foreground (root)
#   make test                 set up and run every test tier (Tests/run-tests.sh; root)
#   make load                 the hostile-client tier at ten times its size, and the
#                             rig's dropped-events tier for 1,000 rounds (root; slow)
#   make bench-hostile        what hostile clients cost the release daemon (figures)
#   make hot-order            lay out the functions that run at start and per press together
#                             again (bench/hot.order; bench/hotorder.sh)
#   make fuzz                 fuzz the parsers and the protocol for longer, and run the loss
#                             simulation for a million schedules (docs/TESTING.md)
#   make sim                  the loss simulation: SIM_COUNT seeded schedules, or SEED=N's
#                             with its trace (docs/TESTING.md)
#
# Where things go. systemd, systemd-sysusers and udev all search
# /usr/local/lib/... as well as /usr/lib/... (see `systemd-analyze unit-paths`,
# sysusers.d(5), udev(7)), so the units, the sysusers file and the udev rules
# follow PREFIX like everything else, and `make uninstall` leaves nothing
# behind: install records the directories it had to create in
# $(DOCDIR)/installed-directories, and uninstall removes those (when empty)
# and no others. With a PREFIX those tools do not search (/opt/...), set UNITDIR,
# SYSUSERSDIR and UDEVRULESDIR to directories they do, for example
# UNITDIR=/etc/systemd/system SYSUSERSDIR=/etc/sysusers.d
# UDEVRULESDIR=/etc/udev/rules.d. Nothing is ever written to /etc by default:
# /etc belongs to the administrator (shutterd.conf, local udev rules).

PREFIX       ?= /usr/local
DESTDIR      ?=
BINDIR       ?= $(PREFIX)/bin
# The two daemons (shutterd, shutterd-mqtt); the Debian package puts them in /usr/sbin.
SBINDIR      ?= $(BINDIR)
LIBDIR       ?= $(PREFIX)/lib
UNITDIR      ?= $(LIBDIR)/systemd/system
SYSUSERSDIR  ?= $(LIBDIR)/sysusers.d
UDEVRULESDIR ?= $(LIBDIR)/udev/rules.d
MANDIR       ?= $(PREFIX)/share/man
DOCDIR       ?= $(PREFIX)/share/doc/shutterd

# swift on PATH, else the toolchain at /opt/swift (as README's two commands allow).
SWIFT        ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
SWIFTFLAGS   ?=
# Release binaries that stand alone (docs/DESIGN.md, "Binaries and memory"): the Swift
# runtime linked in (--static-swift-stdlib) and no RUNPATH (--disable-local-rpath); the
# toolchain's lld links, with DT_RELR relocations (-z pack-relative-relocs, glibc 2.36);
# _StringProcessing (Regex), which nothing here uses, is not imported; libstdc++, which the
# Swift runtime needs, is linked in from its static archive (through a linker script named
# libstdc++.so in $(GENDIR)/staticcxx, found before the system's). The functions that run
# at start and on the press path are laid out together, in bench/hot.order's order
# (bench/hotorder.sh, make hot-order), so that the text they share pages with is small.
# Full RELRO (-z relro -z now: every library symbol bound at start, then the GOT read-only);
# it costs no idle memory or start-up beyond noise (docs/PACKAGING.md, "Hardening").
STATIC_FLAGS  = --static-swift-stdlib --disable-local-rpath --toolset $(CURDIR)/$(GENDIR)/toolset.json \
	-Xswiftc -Xfrontend -Xswiftc -disable-implicit-string-processing-module-import \
	-Xlinker -L$(CURDIR)/$(GENDIR)/staticcxx \
	-Xlinker --symbol-ordering-file=$(CURDIR)/bench/hot.order -Xlinker --no-warn-symbol-ordering \
	-Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
# The toolchain's clang finds the C++ library as the link does (a minimal Debian has no g++).
CLANG         = $(dir $(realpath $(SWIFT)))clang
# Where `swift build -c release` leaves the binaries.
SWIFT_BIN    ?= .build/release
# Generated files (inside .build/, which is not tracked).
GENDIR       ?= .build/dist

INSTALL      ?= install
SED          ?= sed

DOCS = $(wildcard README.md docs/*.md)

.PHONY: all build units install post-install uninstall check check-units check-format check-door \
	check-rules check-man check-install check-systemd check-rig-release check-licence test run clean bench load \
	bench-hostile fuzz sim deb dsc repo check-deb hot-order generate check-generated

all: build units

build: $(GENDIR)/toolset.json $(GENDIR)/staticcxx/libstdc++.so
	$(SWIFT) build -c release $(STATIC_FLAGS) $(SWIFTFLAGS) --product shutterd
	$(SWIFT) build -c release $(STATIC_FLAGS) $(SWIFTFLAGS) --product shutterctl
	$(SWIFT) build -c release $(STATIC_FLAGS) $(SWIFTFLAGS) --product shutterd-mqtt

$(GENDIR)/toolset.json: Makefile
	@mkdir -p $(GENDIR)
	printf '%s\n' '{"schemaVersion": "1.0",' \
		' "swiftCompiler": {"extraCLIOptions": ["-use-ld=lld"]},' \
		' "linker": {"extraCLIOptions": ["-z", "pack-relative-relocs"]}}' > $@

$(GENDIR)/staticcxx/libstdc++.so: Makefile
	@mkdir -p $(GENDIR)/staticcxx
	@a=$$($(CLANG) -print-file-name=libstdc++.a); [ -f "$$a" ] || \
		{ echo "libstdc++.a not found ($(CLANG) -print-file-name): apt-get install libstdc++-12-dev" >&2; exit 1; }; \
		echo "INPUT($$a)" > $@

units: $(GENDIR)/shutterd.service $(GENDIR)/shutterd-mqtt.service

# SBINDIR is substituted without DESTDIR: the unit names the final location.
# The file is remade whenever SBINDIR changes (through the .sbindir stamp).
$(GENDIR)/%.service: systemd/%.service.in $(GENDIR)/.sbindir
	$(SED) 's|@SBINDIR@|$(SBINDIR)|g' $< > $@.tmp
	mv $@.tmp $@

$(GENDIR)/.sbindir: FORCE
	@mkdir -p $(GENDIR)
	@echo '$(SBINDIR)' | cmp -s - $@ || echo '$(SBINDIR)' > $@

.PHONY: FORCE
FORCE:

# Every directory install puts something in. Those that do not exist yet are
# created, and listed (without DESTDIR) in $(DOCDIR)/installed-directories, added
# to what an earlier install listed, so that uninstall removes exactly those.
INSTALL_DIRS = $(BINDIR) $(SBINDIR) $(UNITDIR) $(SYSUSERSDIR) $(UDEVRULESDIR) $(MANDIR)/man8 \
	$(MANDIR)/man1 $(DOCDIR)
DIRLIST = $(DOCDIR)/installed-directories

install: units
	@for b in shutterd shutterctl shutterd-mqtt; do \
		if [ ! -x $(SWIFT_BIN)/$$b ]; then \
			echo "$(SWIFT_BIN)/$$b is missing: run 'make' (as yourself) first" >&2; \
			exit 1; \
		fi; \
	done
	@set -e; new=; \
	for d in $(INSTALL_DIRS); do \
		p=$$d; \
		while [ "$$p" != / ] && [ ! -d "$(DESTDIR)$$p" ]; do new="$$new $$p"; p=$$(dirname "$$p"); done; \
	done; \
	echo "$(INSTALL) -d $(addprefix $(DESTDIR),$(INSTALL_DIRS))"; \
	$(INSTALL) -d $(addprefix $(DESTDIR),$(INSTALL_DIRS)); \
	{ cat "$(DESTDIR)$(DIRLIST)" 2>/dev/null || true; for p in $$new; do echo "$$p"; done; } \
		| sort -u > "$(DESTDIR)$(DIRLIST).tmp"; \
	mv "$(DESTDIR)$(DIRLIST).tmp" "$(DESTDIR)$(DIRLIST)"; \
	chmod 0644 "$(DESTDIR)$(DIRLIST)"
	$(INSTALL) -m 0755 $(SWIFT_BIN)/shutterd $(SWIFT_BIN)/shutterd-mqtt $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 0755 $(SWIFT_BIN)/shutterctl $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0644 $(GENDIR)/shutterd.service $(GENDIR)/shutterd-mqtt.service systemd/shutterd.socket \
		systemd/shutterd-mqtt.path $(DESTDIR)$(UNITDIR)/
	$(INSTALL) -m 0644 systemd/shutterd.sysusers $(DESTDIR)$(SYSUSERSDIR)/shutterd.conf
	$(INSTALL) -m 0644 udev-rules/60-shutterd.rules $(DESTDIR)$(UDEVRULESDIR)/
	$(INSTALL) -m 0644 man/shutterd.8 man/shutterd-mqtt.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 man/shutterctl.1 $(DESTDIR)$(MANDIR)/man1/
	$(if $(DOCS),$(INSTALL) -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/)
	@echo
	@echo "Installed. To start shutterd at boot (as root):"
	@echo "  make post-install"
	@echo "  systemctl enable --now shutterd.socket shutterd.service"

# Make the installed files take effect on this machine: the shutterd user and
# group, the new units, the new udev rules (applied to devices already there).
post-install:
	@if [ -n "$(DESTDIR)" ]; then echo "post-install acts on this machine; not with DESTDIR" >&2; exit 1; fi
	systemd-sysusers $(SYSUSERSDIR)/shutterd.conf
	systemctl daemon-reload
	udevadm control --reload
	udevadm trigger --action=change --subsystem-match=input

# As root with DESTDIR empty on a machine running systemd, the units are first
# stopped and disabled (`systemctl disable --now`), so that no service is left
# running a deleted binary and no enable link points at a deleted unit; without
# a running systemd (a chroot, DESTDIR) `systemctl --root` removes the enable
# links alone. After the files, the directories install created are removed
# (deepest first, only when empty), and systemd and udev reload.
SYSTEMD_RUNNING = $(shell [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ] && [ "$$(id -u)" = 0 ] && echo yes)

uninstall:
	@if [ -f "$(DESTDIR)$(UNITDIR)/shutterd.service" ] || [ -f "$(DESTDIR)$(UNITDIR)/shutterd.socket" ] || \
		[ -f "$(DESTDIR)$(UNITDIR)/shutterd-mqtt.service" ] || [ -f "$(DESTDIR)$(UNITDIR)/shutterd-mqtt.path" ]; then \
		if [ "$(SYSTEMD_RUNNING)" = yes ]; then \
			echo "systemctl disable --now shutterd-mqtt.path shutterd-mqtt.service shutterd.socket shutterd.service"; \
			systemctl disable --now shutterd-mqtt.path shutterd-mqtt.service shutterd.socket shutterd.service || \
				echo "uninstall: systemctl disable --now failed (above); removing the files anyway" >&2; \
		elif command -v systemctl >/dev/null 2>&1; then \
			echo "systemctl --root=$(DESTDIR)/ disable shutterd-mqtt.path shutterd-mqtt.service shutterd.socket shutterd.service"; \
			systemctl --root="$(DESTDIR)/" disable shutterd-mqtt.path shutterd-mqtt.service shutterd.socket shutterd.service || \
				echo "uninstall: systemctl --root disable failed (above); removing the files anyway" >&2; \
		else \
			echo "uninstall: no systemctl; remove any enable links of shutterd.socket and shutterd.service yourself" >&2; \
		fi; \
	fi
	rm -f $(DESTDIR)$(SBINDIR)/shutterd $(DESTDIR)$(BINDIR)/shutterctl $(DESTDIR)$(SBINDIR)/shutterd-mqtt
	rm -f $(DESTDIR)$(UNITDIR)/shutterd.service $(DESTDIR)$(UNITDIR)/shutterd.socket \
		$(DESTDIR)$(UNITDIR)/shutterd-mqtt.service $(DESTDIR)$(UNITDIR)/shutterd-mqtt.path
	rm -f $(DESTDIR)$(SYSUSERSDIR)/shutterd.conf
	rm -f $(DESTDIR)$(UDEVRULESDIR)/60-shutterd.rules
	rm -f $(DESTDIR)$(MANDIR)/man8/shutterd.8 $(DESTDIR)$(MANDIR)/man8/shutterd-mqtt.8 \
		$(DESTDIR)$(MANDIR)/man1/shutterctl.1
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	@set -e; list="$(DESTDIR)$(DIRLIST)"; \
	if [ -f "$$list" ]; then \
		dirs=$$(sort -r "$$list"); rm -f "$$list"; \
		for d in $$dirs; do \
			case $$d in /*) ;; *) echo "uninstall: $$list names '$$d', not an absolute path; ignored" >&2; continue ;; esac; \
			if [ -d "$(DESTDIR)$$d" ]; then rmdir --ignore-fail-on-non-empty "$(DESTDIR)$$d"; fi; \
		done; \
		echo "removed the directories install created, where empty"; \
	else \
		rmdir --ignore-fail-on-non-empty $(DESTDIR)$(DOCDIR) 2>/dev/null || true; \
	fi
	@if [ "$(SYSTEMD_RUNNING)" = yes ]; then \
		echo "systemctl daemon-reload"; systemctl daemon-reload; \
		rmdir --ignore-fail-on-non-empty /run/shutterd 2>/dev/null || true; \
	fi
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && [ -S /run/udev/control ]; then \
		echo "udevadm control --reload"; udevadm control --reload; \
	fi
	@echo "The user and group shutterd, if created, are left in place (userdel shutterd)."

check: check-units check-rules check-man check-install check-format check-door check-generated check-licence

# The licence: LICENSE, debian/copyright (DEP-5, every tracked file), the sources' SPDX
# headers, and licensecheck finding nothing else (scripts/check-licence).
check-licence:
	@scripts/check-licence

# The clients' message types, from the protocol's one declaration (Sources/ShutterCore/
# Schema.swift, and UdevProperties.swift for the device fields udev properties fill) through
# `shutterctl schema`: the Python client's classes (scripts/gen-python-messages) and the Swift
# client's structs and decoders (scripts/gen-swift-messages, laid out by swift format).
# shutterctl links ShutterClient, so a schema change is built once with the old file, then
# generated, then built again.
MESSAGES_PY    = clients/python/shutterd/_messages.py
MESSAGES_SWIFT = Sources/ShutterClient/GeneratedMessages.swift
generate:
	@[ -x $(SWIFT_BIN)/shutterctl ] || { echo "$(SWIFT_BIN)/shutterctl is missing: run 'make' first" >&2; exit 1; }
	$(SWIFT_BIN)/shutterctl schema | python3 scripts/gen-python-messages > $(MESSAGES_PY).tmp
	mv $(MESSAGES_PY).tmp $(MESSAGES_PY)
	$(SWIFT_BIN)/shutterctl schema | python3 scripts/gen-swift-messages > $(MESSAGES_SWIFT).raw
	$(SWIFT) format - < $(MESSAGES_SWIFT).raw > $(MESSAGES_SWIFT).tmp
	rm $(MESSAGES_SWIFT).raw
	mv $(MESSAGES_SWIFT).tmp $(MESSAGES_SWIFT)

check-generated:
	@[ -x $(SWIFT_BIN)/shutterctl ] || { echo "$(SWIFT_BIN)/shutterctl is missing: run 'make' first" >&2; exit 1; }
	@$(SWIFT_BIN)/shutterctl schema | python3 scripts/gen-python-messages | diff -u $(MESSAGES_PY) - || \
		{ echo "$(MESSAGES_PY) differs from the schema: run 'make generate'" >&2; exit 1; }
	@set -e; t=$$(mktemp); trap 'rm -f "$$t"' EXIT; \
		$(SWIFT_BIN)/shutterctl schema | python3 scripts/gen-swift-messages > "$$t"; \
		$(SWIFT) format - < "$$t" | diff -u $(MESSAGES_SWIFT) - || \
		{ echo "$(MESSAGES_SWIFT) differs from the schema: run 'make generate'" >&2; exit 1; }

# Only the platform modules depend on C, each on its own library; nothing re-exports; every
# fallible C call is checked where it is made; the C targets' own C calls what it may and
# throws no result away (scripts/check-c-door, from the package graph, SwiftPM's plan of the
# debug and the release build, the compiler's imports and typechecked tree with those flags,
# and clang's tree of the C targets' C; every target, bench/ and the tests included). The
# script is tested on copies of the package with a mistake each (5 to 10 minutes on two
# cores shared with other builds; the script alone: 5 s with its cache in
# .build/check-c-door, half a minute without).
check-door:
	@SWIFT=$(SWIFT) scripts/check-c-door .
	@SWIFT=$(SWIFT) Tests/check-c-door-test.sh >/dev/null

# The Debian packages (debian/build.sh; docs/PACKAGING.md): shutterd and shutterd-mqtt in
# .build/deb, built from the tree as it is (uncommitted changes are built, and said).
deb:
	sh debian/build.sh

# The native source package of the same version (debian/build.sh source; docs/PACKAGING.md):
# .dsc, .tar.xz, _source.changes and _source.buildinfo in .build/deb.
dsc:
	sh debian/build.sh source

# A signed apt repository of what make deb and make dsc made (debian/repo.sh; reprepro and
# gpg, with a key made for it), in .build/repo, for any static file server; docs/PACKAGING.md
# says how a rig adds it. REPO_DIR, REPO_GNUPGHOME (keep the key!) and REPO_CODENAME as there.
repo:
	sh debian/repo.sh

# lintian on the packages make deb built, and on the source package of the same version when
# make dsc made it: no error, and no warning that is not fixed or overridden with its reason
# (debian/*.lintian-overrides).
check-deb:
	@set -e; debs=$$(ls .build/deb/shutterd_*.deb .build/deb/shutterd-mqtt_*.deb 2>/dev/null) || \
		{ echo "check-deb: no packages in .build/deb: run make deb"; exit 1; }; \
	v=$$(dpkg-deb -f .build/deb/shutterd_*.deb Version); \
	[ ! -f ".build/deb/shutterd_$$v.dsc" ] || debs="$$debs .build/deb/shutterd_$$v.dsc"; \
	command -v lintian >/dev/null || { echo "check-deb: lintian not found (apt-get install lintian)"; exit 1; }; \
	st=0; out=$$(lintian --fail-on error,warning --display-level '>=warning' $$debs 2>&1) || st=$$?; \
	out=$$(printf '%s\n' "$$out" | grep -v '^running with root privileges' || true); \
	[ -z "$$out" ] || echo "$$out"; \
	[ "$$st" = 0 ] || { echo "check-deb: lintian reports the above (exit $$st)"; exit 1; }; \
	echo "check-deb: lintian: no error or warning in" $$(basename -a $$debs)

# The Swift sources as swift-format (the toolchain's own) writes them: .swift-format's
# rules, no warning. `swift format format -i -r` fixes most of what it reports.
FORMAT_PATHS = Package.swift Sources Tests/ShutterCoreTests Tests/ShutterDaemonTests Tests/ShutterctlTests \
	Tests/ShutterClientTests Tests/ClientFixture examples/swift/Package.swift examples/swift/Sources \
	bench/presspath bench/client/Package.swift bench/client/Sources Tests/fuzz/FuzzTarget.swift
check-format:
	@out=$$($(SWIFT) format lint -r $(FORMAT_PATHS) 2>&1); \
	if [ -n "$$out" ]; then echo "$$out"; echo "check-format: swift format lint has warnings"; exit 1; fi; \
	echo "check-format: swift format lint is clean"

# A staged install, enable and uninstall: every file lands where it should, and
# afterwards the staging tree is exactly what it was before: no file, directory
# or enable link left, and the directories that were there before (as /usr/local/bin
# and /usr/local/share/man/man1 are on Debian, and a .wants directory with another
# service's link) still there.
CHECK_PREEXISTING = $(BINDIR) $(MANDIR)/man1 /etc/systemd/system/multi-user.target.wants

check-install: units
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	command -v systemctl >/dev/null || { echo "check-install: systemctl not found (apt-get install systemd)"; exit 1; }; \
	mkdir -p $(addprefix $$d,$(CHECK_PREEXISTING)); \
	ln -s /lib/systemd/system/other.service $$d/etc/systemd/system/multi-user.target.wants/; \
	before=$$(cd "$$d" && find . | sort); \
	$(MAKE) -s install DESTDIR=$$d SWIFT_BIN=$(SWIFT_BIN) >/dev/null; \
	for f in $(SBINDIR)/shutterd $(BINDIR)/shutterctl $(SBINDIR)/shutterd-mqtt $(UNITDIR)/shutterd.service \
		$(UNITDIR)/shutterd.socket $(UNITDIR)/shutterd-mqtt.service $(UNITDIR)/shutterd-mqtt.path \
		$(SYSUSERSDIR)/shutterd.conf \
		$(UDEVRULESDIR)/60-shutterd.rules $(MANDIR)/man8/shutterd.8 $(MANDIR)/man8/shutterd-mqtt.8 \
		$(MANDIR)/man1/shutterctl.1 $(DOCDIR)/README.md $(DIRLIST); do \
		[ -f "$$d$$f" ] || { echo "check-install: $$f was not installed"; exit 1; }; \
	done; \
	grep -q '^ExecStart=$(SBINDIR)/shutterd' "$$d$(UNITDIR)/shutterd.service" || \
		{ echo "check-install: ExecStart does not name $(SBINDIR)/shutterd"; exit 1; }; \
	for p in $(CHECK_PREEXISTING); do \
		! grep -qx "$$p" "$$d$(DIRLIST)" || { echo "check-install: $(DIRLIST) claims $$p, which existed before"; exit 1; }; \
	done; \
	systemctl --root="$$d" enable shutterd.socket shutterd.service shutterd-mqtt.service shutterd-mqtt.path >/dev/null 2>&1; \
	links=$$(find "$$d/etc/systemd/system" -type l -name "shutterd*" | wc -l); \
	[ "$$links" -eq 4 ] || { echo "check-install: systemctl --root enable made $$links links, expected 4"; exit 1; }; \
	$(MAKE) -s install DESTDIR=$$d SWIFT_BIN=$(SWIFT_BIN) >/dev/null; \
	$(MAKE) -s uninstall DESTDIR=$$d >"$$d.log" 2>&1 || { cat "$$d.log"; rm -f "$$d.log"; exit 1; }; \
	rm -f "$$d.log"; \
	after=$$(cd "$$d" && find . | sort); \
	if [ "$$before" != "$$after" ]; then \
		echo "check-install: the staging tree after install, enable and uninstall differs from before:"; \
		printf '%s\n' "$$before" > "$$d.before"; printf '%s\n' "$$after" > "$$d.after"; \
		diff "$$d.before" "$$d.after" | sed -n 's/^[<>] /  /p' | sed 's/^/ /'; \
		rm -f "$$d.before" "$$d.after"; exit 1; \
	fi; \
	echo "check-install: install (twice), enable and uninstall under DESTDIR leave the tree as it was"

# systemd-analyze verify + security (exposure <= 2.0) + sysusers dry run + the
# socket's owner. Exit 77 (no systemd-analyze) passes as a skip; with CI=true the
# script fails instead.
check-units:
	SHUTTERD_BIN=$(SWIFT_BIN)/shutterd systemd/check-units.sh || [ $$? -eq 77 ]

# The udev rules against fake devices; needs root and a mount namespace. Exit 77
# (cannot run here, the reason printed) passes as a skip; with CI=true the script
# fails instead.
check-rules:
	udev-rules/test-rules.sh || [ $$? -eq 77 ]

# The systemd boot tier: Debian 12 (systemd 252), then Debian 13 (systemd 257, its own
# kernel), each with systemd as PID 1 under qemu, the README's install, the units at work,
# uninstall, and the packages built here installed, upgraded and purged from a signed
# repository (Tests/systemd/run.sh; root; about 15 minutes; each image is built once into
# /var/cache/shutterd-systemd; SHUTTERD_SYSTEMD_RELEASES picks the releases). `make test`
# runs it when systemd/, udev-rules/, debian/, Tests/systemd/ or this Makefile changed.
check-systemd:
	sh Tests/systemd/run.sh $(SWIFT_BIN)/shutterd $(SWIFT_BIN)/shutterctl

# The kernel rig on another Debian release's kernel and bluetoothd (RIG_RELEASE, default
# trixie: Debian 13's 6.12 and BlueZ 5.82, its linux-image-amd64 and its bluez with the
# packages bluez depends on downloaded and unpacked into the rig's cache by
# Tests/rig/release.sh, nothing installed; the Bluetooth tier runs that bluetoothd through
# its own ld.so), with this machine's root file system otherwise: the device checks and every
# scenario but the Swift client fixture's (a client's build, nothing of the kernel's). Root;
# about 5 minutes. `make test` runs it (stage 8b) with the debug binaries.
RIG_RELEASE      ?= trixie
RIG_RELEASE_ONLY  = !swift-client-fixture
check-rig-release:
	SHUTTERD_RIG_RELEASE=$(RIG_RELEASE) sh Tests/rig/run.sh --only '$(RIG_RELEASE_ONLY)' \
		$(SWIFT_BIN)/shutterd $(SWIFT_BIN)/shutterctl

check-man:
	@for page in man/shutterd.8 man/shutterd-mqtt.8 man/shutterctl.1; do \
		echo "groff -man -ww -z $$page"; \
		out=$$(groff -man -Tutf8 -ww -z $$page 2>&1); \
		if [ -n "$$out" ]; then echo "$$out"; exit 1; fi; \
	done

test:
	sh Tests/run-tests.sh

# What make test fuzzes briefly, for longer: each parser FUZZ_SECONDS under libFuzzer, then
# FUZZ_REQUESTS protocol requests (a seed: FUZZ_FLAGS=--seed N) against a debug shutterd,
# then the loss simulation for FUZZ_SCHEDULES schedules.
FUZZ_SECONDS   ?= 600
FUZZ_REQUESTS  ?= 1000000
FUZZ_SCHEDULES ?= 1000000
fuzz:
	$(SWIFT) build $(SWIFTFLAGS) --product shutterd
	sh Tests/fuzz/run.sh $(FUZZ_SECONDS)
	python3 Tests/fuzz/protocol-fuzz.py --requests $(FUZZ_REQUESTS) --daemon .build/debug/shutterd $(FUZZ_FLAGS)
	$(MAKE) sim SIM_COUNT=$(FUZZ_SCHEDULES)

# The loss simulation (docs/TESTING.md, "The loss simulation"): SIM_COUNT seeded schedules
# from seed SIM_FIRST over the real core, built optimised (in .build/sim); SEED=N replays
# one schedule with its trace and, when it fails, its shortest form. make test runs 2,000.
SIM_COUNT ?= 100000
SIM_FIRST ?= 1
SIM_BUILD  = -c release -Xswiftc -enable-testing --build-path .build/sim
sim:
	$(SWIFT) build --build-tests $(SIM_BUILD) $(SWIFTFLAGS)
	SHUTTERD_SIM_COUNT=$(SIM_COUNT) SHUTTERD_SIM_FIRST=$(SIM_FIRST) $(if $(SEED),SHUTTERD_SIM_SEED=$(SEED)) \
		$(SWIFT) test --skip-build $(SIM_BUILD) $(SWIFTFLAGS) --filter 'SimulationTests|SimulationHoles'

# One command from a fresh Debian 12 machine to a running daemon: the packages, a
# release build, and shutterd in the foreground with its log on the terminal.
run:
	sh Tests/setup.sh
	$(MAKE) build
	$(SWIFT_BIN)/shutterd --verbose $(RUNFLAGS)

# shutterd against a minimal C relay, acpid, lircd and a direct evdev reader in the kernel
# rig, booted twice, timed and counted (root; about 15 minutes; not a test; bench/README.md).
# Writes bench/results.md and bench/results.json.
bench:
	sh bench/run.sh

# bench/hot.order made again from the binaries make build made (bench/hotorder.sh, valgrind);
# the binaries are removed so that the next make build links them in the new order.
hot-order: build
	sh bench/hotorder.sh
	rm -f $(SWIFT_BIN)/shutterd $(SWIFT_BIN)/shutterctl $(SWIFT_BIN)/shutterd-mqtt

# The hostile-client tier, ten times larger than in `make test`; the kernel rig's
# dropped-events tier, 1,000 rounds per device (root, as the rig needs).
load:
	$(SWIFT) build $(SWIFTFLAGS) --product shutterd --product shutterctl
	python3 Tests/load/hostile.py .build/debug/shutterd --scale 10
	SHUTTERD_RIG_FLOOD_ROUNDS=1000 SHUTTERD_RIG_TIMEOUT=3600 \
		sh Tests/rig/run.sh --only "enumerate,hotplug-add,dropped-events-*" .build/debug/shutterd

# What attacks cost the release daemon: CPU per MiB, a fresh client's hello latency, RSS.
bench-hostile:
	$(SWIFT) build -c release $(SWIFTFLAGS) --product shutterd
	python3 Tests/load/hostile.py $(SWIFT_BIN)/shutterd --bench

clean:
	rm -rf $(GENDIR)
