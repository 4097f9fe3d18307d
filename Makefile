# The two commands of the README. Everything they need, they install (scripts/setup.sh).
.PHONY: run test soak bench
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
# Not part of CI: a release build of the server under a simulated fleet, figures printed
# (docs/soak.md). AGENTS, DURATION and INTERVAL_MS size it.
soak:
	bash scripts/soak.sh
# Not part of CI: release-build benchmarks against baselines measured in the same run;
# writes docs/benchmarks.md.
bench:
	bash scripts/bench.sh
