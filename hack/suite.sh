#!/usr/bin/env bash
# Runs one test suite of `make test` and says which, and how long it took:
#   hack/suite.sh NAME 'COMMAND'
# prints "== suite NAME: COMMAND", runs COMMAND with bash, then
# "== suite NAME: passed in 5m12s" (or "failed in ..."), and exits as
# COMMAND did.
set -uo pipefail

if [[ $# -ne 2 ]]; then
	echo "usage: $0 NAME 'COMMAND'" >&2
	exit 2
fi
name=$1 command=$2

duration() {
	local s=$1
	if ((s >= 3600)); then
		printf '%dh%dm%ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
	elif ((s >= 60)); then
		printf '%dm%ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "${s}"
	fi
}

echo "== suite ${name}: ${command}"
start=${SECONDS}
bash -o pipefail -c "${command}"
rc=$?
took=$(duration $((SECONDS - start)))
if [[ ${rc} -eq 0 ]]; then
	echo "== suite ${name}: passed in ${took}"
else
	echo "== suite ${name}: failed in ${took} (exit ${rc})"
fi
exit "${rc}"
