# shutterd: build, install, check.
#
#   make                      build both binaries (release) and the unit file
#   make install              install under PREFIX (default /usr/local)
#   make install PREFIX=/usr DESTDIR=/tmp/pkg   staged install for packaging
#   make post-install         create the user, reload systemd and udev (root,
#                             DESTDIR empty)
#   make uninstall            remove what install put there
#   make check                check-units, check-rules, check-man
#   make run                  set up, build and run shutterd in the foreground (root)
#   make test                 set up and run every test tier (Tests/run-tests.sh; root)
#   make fuzz                 fuzz the parsers and the protocol for longer (docs/TESTING.md)
#
# Where things go. systemd, systemd-sysusers and udev all search
# /usr/local/lib/... as well as /usr/lib/... (see `systemd-analyze unit-paths`,
# sysusers.d(5), udev(7)), so the units, the sysusers file and the udev rules
# follow PREFIX like everything else, and `make uninstall` leaves nothing
# behind. With a PREFIX those tools do not search (/opt/...), set UNITDIR,
# SYSUSERSDIR and UDEVRULESDIR to directories they do, for example
# UNITDIR=/etc/systemd/system SYSUSERSDIR=/etc/sysusers.d
# UDEVRULESDIR=/etc/udev/rules.d. Nothing is ever written to /etc by default:
# /etc belongs to the administrator (shutterd.conf, local udev rules).

PREFIX       ?= /usr/local
DESTDIR      ?=
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
UNITDIR      ?= $(LIBDIR)/systemd/system
SYSUSERSDIR  ?= $(LIBDIR)/sysusers.d
UDEVRULESDIR ?= $(LIBDIR)/udev/rules.d
MANDIR       ?= $(PREFIX)/share/man
DOCDIR       ?= $(PREFIX)/share/doc/shutterd

SWIFT        ?= swift
SWIFTFLAGS   ?=
# Where `swift build -c release` leaves the binaries.
SWIFT_BIN    ?= .build/release
# Generated files (inside .build/, which is not tracked).
GENDIR       ?= .build/dist

INSTALL      ?= install
SED          ?= sed

DOCS = $(wildcard README.md docs/*.md)

.PHONY: all build units install post-install uninstall check check-units \
	check-rules check-man check-install test run clean bench fuzz

all: build units

build:
	$(SWIFT) build -c release $(SWIFTFLAGS) --product shutterd
	$(SWIFT) build -c release $(SWIFTFLAGS) --product shutterctl

units: $(GENDIR)/shutterd.service

# BINDIR is substituted without DESTDIR: the unit names the final location.
# The file is remade whenever BINDIR changes (through the .bindir stamp).
$(GENDIR)/shutterd.service: systemd/shutterd.service.in $(GENDIR)/.bindir
	$(SED) 's|@BINDIR@|$(BINDIR)|g' systemd/shutterd.service.in > $@.tmp
	mv $@.tmp $@

$(GENDIR)/.bindir: FORCE
	@mkdir -p $(GENDIR)
	@echo '$(BINDIR)' | cmp -s - $@ || echo '$(BINDIR)' > $@

.PHONY: FORCE
FORCE:

install: units
	@for b in shutterd shutterctl; do \
		if [ ! -x $(SWIFT_BIN)/$$b ]; then \
			echo "$(SWIFT_BIN)/$$b is missing: run 'make' (as yourself) first" >&2; \
			exit 1; \
		fi; \
	done
	$(INSTALL) -d $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 0755 $(SWIFT_BIN)/shutterd $(SWIFT_BIN)/shutterctl $(DESTDIR)$(BINDIR)/
	$(INSTALL) -d $(DESTDIR)$(UNITDIR)
	$(INSTALL) -m 0644 $(GENDIR)/shutterd.service systemd/shutterd.socket $(DESTDIR)$(UNITDIR)/
	$(INSTALL) -d $(DESTDIR)$(SYSUSERSDIR)
	$(INSTALL) -m 0644 systemd/shutterd.sysusers $(DESTDIR)$(SYSUSERSDIR)/shutterd.conf
	$(INSTALL) -d $(DESTDIR)$(UDEVRULESDIR)
	$(INSTALL) -m 0644 udev-rules/60-shutterd.rules $(DESTDIR)$(UDEVRULESDIR)/
	$(INSTALL) -d $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 0644 man/shutterd.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 man/shutterctl.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -d $(DESTDIR)$(DOCDIR)
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

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/shutterd $(DESTDIR)$(BINDIR)/shutterctl
	rm -f $(DESTDIR)$(UNITDIR)/shutterd.service $(DESTDIR)$(UNITDIR)/shutterd.socket
	rm -f $(DESTDIR)$(SYSUSERSDIR)/shutterd.conf
	rm -f $(DESTDIR)$(UDEVRULESDIR)/60-shutterd.rules
	rm -f $(DESTDIR)$(MANDIR)/man8/shutterd.8 $(DESTDIR)$(MANDIR)/man1/shutterctl.1
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null
	@echo "The user and group shutterd, if created, are left in place (userdel shutterd)."

check: check-units check-rules check-man check-install

# A staged install and uninstall: every file lands where it should, and nothing is left.
check-install: units
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	$(MAKE) -s install DESTDIR=$$d SWIFT_BIN=$(SWIFT_BIN) >/dev/null; \
	for f in $(BINDIR)/shutterd $(BINDIR)/shutterctl $(UNITDIR)/shutterd.service \
		$(UNITDIR)/shutterd.socket $(SYSUSERSDIR)/shutterd.conf $(UDEVRULESDIR)/60-shutterd.rules \
		$(MANDIR)/man8/shutterd.8 $(MANDIR)/man1/shutterctl.1 $(DOCDIR)/README.md; do \
		[ -f "$$d$$f" ] || { echo "check-install: $$f was not installed"; exit 1; }; \
	done; \
	grep -q '^ExecStart=$(BINDIR)/shutterd' "$$d$(UNITDIR)/shutterd.service" || \
		{ echo "check-install: ExecStart does not name $(BINDIR)/shutterd"; exit 1; }; \
	$(MAKE) -s uninstall DESTDIR=$$d >/dev/null; \
	left=$$(find "$$d" -type f); \
	[ -z "$$left" ] || { echo "check-install: uninstall left $$left"; exit 1; }; \
	echo "check-install: install and uninstall under DESTDIR are complete"

# systemd-analyze verify + security (exposure <= 2.0) + sysusers dry run.
check-units:
	SHUTTERD_BIN=$(SWIFT_BIN)/shutterd systemd/check-units.sh

# The udev rules against fake devices; needs root (exit 77 = skipped).
check-rules:
	udev-rules/test-rules.sh || [ $$? -eq 77 ]

check-man:
	@for page in man/shutterd.8 man/shutterctl.1; do \
		echo "groff -man -ww -z $$page"; \
		out=$$(groff -man -Tutf8 -ww -z $$page 2>&1); \
		if [ -n "$$out" ]; then echo "$$out"; exit 1; fi; \
	done

test:
	sh Tests/run-tests.sh

# What make test fuzzes briefly, for longer: each parser FUZZ_SECONDS under libFuzzer, then
# FUZZ_REQUESTS protocol requests (a seed: FUZZ_FLAGS=--seed N) against a debug shutterd.
FUZZ_SECONDS  ?= 600
FUZZ_REQUESTS ?= 1000000
fuzz:
	$(SWIFT) build $(SWIFTFLAGS) --product shutterd
	sh Tests/fuzz/run.sh $(FUZZ_SECONDS)
	python3 Tests/fuzz/protocol-fuzz.py --requests $(FUZZ_REQUESTS) --daemon .build/debug/shutterd $(FUZZ_FLAGS)

# One command from a fresh Debian 12 machine to a running daemon: the packages, a
# release build, and shutterd in the foreground with its log on the terminal.
run:
	sh Tests/setup.sh
	$(SWIFT) build -c release $(SWIFTFLAGS) --product shutterd
	$(SWIFT) build -c release $(SWIFTFLAGS) --product shutterctl
	$(SWIFT_BIN)/shutterd --verbose $(RUNFLAGS)

# shutterd against acpid, lircd and a direct evdev reader in the kernel rig (root; about
# 6 minutes; not a test). Writes bench/results.md and bench/results.json.
bench:
	sh bench/run.sh

clean:
	rm -rf $(GENDIR)
