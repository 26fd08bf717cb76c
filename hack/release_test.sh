#!/usr/bin/env bash
# Tests hack/release.sh (as in the working tree) in a temporary clone of
# this repository's HEAD
# (--no-build: the stamping of binaries and images is make's, tested by
# make images-test): the refusals, the dry run that changes nothing, and
# two releases whose changelog sections hold exactly the commits since the
# tag before. Run by `make check`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
git clone -q --no-local "${ROOT}" "${WORK}/repo"
cd "${WORK}/repo"
git config user.email release-test@example.invalid
git config user.name "release test"
# The clone's history may hold tags of real releases: start from none, so
# the first release below takes every commit.
git tag -l | xargs -r git tag -d >/dev/null

fail=0
ok() { echo "ok   $1"; }
bad() {
	echo "FAIL $1" >&2
	fail=1
}

# expect NAME WANT_RC WANT_TEXT ARGS...: runs the script, checks its exit
# code and that its output holds WANT_TEXT.
expect() {
	local name="$1" want_rc="$2" want="$3" out rc=0
	shift 3
	out="$("${ROOT}/hack/release.sh" --no-build "$@" 2>&1)" || rc=$?
	if [[ "${rc}" != "${want_rc}" ]] || ! grep -qF -- "${want}" <<<"${out}"; then
		bad "${name}: exit ${rc} (want ${want_rc}), output lacks '${want}':"
		echo "${out}" >&2
	else
		ok "${name}"
	fi
}

for v in 1.2.3 v1.2 v01.2.3 v1.2.3. v1.2.3-; do
	expect "malformed ${v}" 1 "malformed version '${v}'" "${v}"
done
expect "no version" 1 "usage:"

echo scratch >untracked.txt
expect "untracked file refused" 1 "uncommitted changes" v0.1.0
rm untracked.txt
echo "# edit" >>Makefile
expect "modified file refused" 1 "uncommitted changes" v0.1.0
git checkout -q Makefile

head_before="$(git rev-parse HEAD)"
# The changelog leaves merge commits out: the last commit it lists is the
# newest that is not one.
subject="$(git log -1 --no-merges --format=%s)"
expect "dry run prints the section" 0 "## v0.1.0" --dry-run v0.1.0
expect "dry run lists the last commit" 0 "${subject#*: }" --dry-run v0.1.0
if [[ -n "$(git status --porcelain)" || "$(git rev-parse HEAD)" != "${head_before}" || -n "$(git tag -l)" ]]; then
	bad "dry run changed the tree, HEAD or the tags"
else
	ok "dry run changes nothing"
fi

expect "first release" 0 "tagged v0.1.0" v0.1.0
chart=deploy/helm/aware/Chart.yaml
if grep -qx 'version: 0.1.0' "${chart}" && grep -qx 'appVersion: v0.1.0' "${chart}"; then ok "chart stamped"; else bad "chart not stamped: $(grep -i version "${chart}")"; fi
images="$(grep -h 'image: aware-' deploy/*/*.yaml)"
if [[ "$(grep -c ':v0.1.0$' <<<"${images}")" == 4 && "$(wc -l <<<"${images}")" == 4 ]]; then
	ok "manifests' images tagged"
else
	bad "manifests' images: ${images}"
fi
if [[ "$(git describe --tags --exact-match)" == v0.1.0 && "$(git log -1 --format=%s)" == "release: v0.1.0" && -z "$(git status --porcelain)" ]]; then
	ok "one commit, tagged, tree clean"
else
	bad "after the release: $(git log -1 --format=%s), $(git status --porcelain)"
fi
# The first section only: the clone's CHANGELOG.md may hold the sections
# of real releases below it.
first_section() { awk '/^## / { n++; next } n == 1' CHANGELOG.md; }
n_first="$(first_section | grep -c '^- ')"
n_items="$(grep -c '^- ' CHANGELOG.md)"
n_commits="$(git rev-list --no-merges --count HEAD~1)"
if [[ "${n_first}" == "${n_commits}" ]]; then ok "first section lists all ${n_commits} commits"; else bad "first section lists ${n_first} of ${n_commits} commits"; fi

expect "same version refused" 1 "tag v0.1.0 exists" v0.1.0
expect "older version refused" 1 "v0.0.9 is not above the last tag v0.1.0" v0.0.9
expect "nothing to release" 1 "no commits since v0.1.0" v0.1.1

echo x >>docs/operations.md
git commit -qam "docs: a change after v0.1.0"
echo y >>docs/operations.md
git commit -qam "a change without an area"
expect "second release" 0 "tagged v0.2.0-rc.1" v0.2.0-rc.1
second="$(awk '/^## v0.2.0-rc.1/ { on = 1; next } /^## / { on = 0 } on' CHANGELOG.md)"
if [[ "$(grep -c '^- ' <<<"${second}")" == 2 ]] && grep -q '^### docs$' <<<"${second}" && grep -q '^- a change after v0.1.0 (' <<<"${second}" &&
	grep -q '^### other$' <<<"${second}" && grep -q 'Changes since v0.1.0.' <<<"${second}"; then
	ok "second section holds the 2 commits since v0.1.0, by area"
else
	bad "second section:
${second}"
fi
if [[ "$(grep -n '^## ' CHANGELOG.md | head -n1)" == *v0.2.0-rc.1* && "$(grep -c '^- ' CHANGELOG.md)" == "$((n_items + 2))" ]]; then
	ok "newest section first, the first kept"
else
	bad "CHANGELOG.md order: $(grep '^## ' CHANGELOG.md)"
fi
exit "${fail}"
