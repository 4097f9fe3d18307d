# The two commands of the README. Everything they need, they install (scripts/setup.sh).
.PHONY: run test
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
