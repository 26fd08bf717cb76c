#!/usr/bin/env bash
# Makes a release of the tree at HEAD: `make release VERSION=vX.Y.Z`.
#
#   hack/release.sh [--dry-run] [--no-build] vX.Y.Z
#
# It refuses a malformed version (vMAJOR.MINOR.PATCH, with an optional
# -prerelease), a tree with uncommitted changes, a tag that exists and a
# version not above the last tag. Then, in one commit "release: vX.Y.Z"
# tagged vX.Y.Z (annotated):
#   - CHANGELOG.md gets a section for the version: the subjects of the
#     commits since the last tag (all of them for the first release),
#     grouped by their "area:" prefix;
#   - the chart's version becomes X.Y.Z and its appVersion (the default
#     image tag) vX.Y.Z;
#   - deploy/'s images are tagged vX.Y.Z, so that the chart and kustomize
#     still install the same objects.
# Last, unless --no-build, `make build images VERSION=vX.Y.Z` stamps the
# binaries (pkg/version.Version) and the images' tag and labels with it.
# Nothing is pushed: push the commit, the tag (git push origin vX.Y.Z) and
# the images (make push REGISTRY=... TAG=vX.Y.Z) after checking them.
#
# --dry-run prints the changelog section and what would change, and
# changes nothing.
set -euo pipefail

die() {
	echo "release: $*" >&2
	exit 1
}

dry_run=0 build=1 version=""
for a in "$@"; do
	case "${a}" in
	--dry-run) dry_run=1 ;;
	--no-build) build=0 ;;
	-*) die "unknown option ${a}" ;;
	*)
		[[ -z "${version}" ]] || die "one version only, got ${version} and ${a}"
		version="${a}"
		;;
	esac
done
[[ -n "${version}" ]] || die "usage: $0 [--dry-run] [--no-build] vX.Y.Z"

# Semantic versioning with a v: no leading zeros, an optional prerelease.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z]+(\.[0-9A-Za-z]+)*)?$'
[[ "${version}" =~ ${semver} ]] || die "malformed version '${version}': want vMAJOR.MINOR.PATCH, e.g. v0.2.0 or v0.2.0-rc.1"

cd "$(git rev-parse --show-toplevel)"

dirty="$(git status --porcelain --untracked-files=normal)"
[[ -z "${dirty}" ]] || die "the tree has uncommitted changes; commit or stash them first:
${dirty}"
! git rev-parse -q --verify "refs/tags/${version}" >/dev/null || die "tag ${version} exists"

last="$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || true)"
if [[ -n "${last}" ]]; then
	# sort -V orders v0.2.0-rc.1 after v0.2.0; a prerelease of a version
	# above the last tag is still above it, which is what is checked.
	top="$(printf '%s\n%s\n' "${last}" "${version}" | sort -V | tail -n1)"
	[[ "${top}" == "${version}" && "${version}" != "${last}" ]] || die "${version} is not above the last tag ${last}"
	range="${last}..HEAD"
else
	range="HEAD"
fi

# changelog prints the section of the version: the commits of range, by
# area (the part of the subject before the first ": "), areas sorted,
# commits oldest first within each.
changelog() {
	local date
	date="$(git log -1 --format=%cs HEAD)"
	printf '## %s (%s)\n\n' "${version}" "${date}"
	if [[ -n "${last}" ]]; then
		printf 'Changes since %s.\n\n' "${last}"
	fi
	local subjects
	subjects="$(git log --reverse --no-merges --format='%h %s' "${range}")"
	[[ -n "${subjects}" ]] || die "no commits since ${last}"
	awk '{
		hash = $1; sub(/^[^ ]+ /, "")
		area = "other"; text = $0
		if (match($0, /^[A-Za-z0-9_.\/ ,-]+: /)) { area = substr($0, 1, RLENGTH - 2); text = substr($0, RLENGTH + 1) }
		if (!(area in seen)) { seen[area] = 1; areas[++n] = area }
		items[area] = items[area] "- " text " (" hash ")\n"
	}
	END {
		# insertion sort: awk has no portable sort
		for (i = 2; i <= n; i++) { a = areas[i]; for (j = i - 1; j > 0 && areas[j] > a; j--) areas[j + 1] = areas[j]; areas[j + 1] = a }
		for (i = 1; i <= n; i++) printf "### %s\n\n%s\n", areas[i], items[areas[i]]
	}' <<<"${subjects}"
}

section="$(changelog)"
chart=deploy/helm/aware/Chart.yaml
mapfile -t manifests < <(grep -l -E '^\s*image: aware-[a-z-]+:' deploy/*/*.yaml)

if ((dry_run)); then
	echo "release ${version} (dry run: nothing changes)"
	echo "would set ${chart} version ${version#v}, appVersion ${version}"
	echo "would tag the images of ${manifests[*]} ${version}"
	echo "would add to CHANGELOG.md, commit \"release: ${version}\" and tag ${version}"
	((build)) && echo "would run make build images VERSION=${version}"
	echo
	printf '%s\n' "${section}"
	exit 0
fi

sed -i -E "s/^version: .*/version: ${version#v}/; s/^appVersion: .*/appVersion: ${version}/" "${chart}"
grep -qx "version: ${version#v}" "${chart}" && grep -qx "appVersion: ${version}" "${chart}" || die "could not stamp ${chart}"
sed -i -E "s/^(\s*image: aware-[a-z-]+):.*/\1:${version}/" "${manifests[@]}"

header='# Changelog

Each release'"'"'s changes, newest first, from the subjects of its commits
(`make release` writes them).
'
{
	if [[ -f CHANGELOG.md ]]; then
		# The header (up to the first section), the new section, the rest.
		awk -v section="${section}" '
			!done && /^## / { print section; print ""; done = 1 }
			{ print }
			END { if (!done) { print ""; print section } }' CHANGELOG.md
	else
		printf '%s\n%s\n' "${header}" "${section}"
	fi
} >CHANGELOG.md.new
mv CHANGELOG.md.new CHANGELOG.md

git add CHANGELOG.md "${chart}" "${manifests[@]}"
git commit -q -m "release: ${version}"
git tag -a "${version}" -m "AWARE ${version}"
echo "release: tagged ${version} at $(git rev-parse --short HEAD)"

if ((build)); then
	make build images VERSION="${version}" TAG="${version}"
fi
echo "release: push it with git push origin HEAD ${version} and make push REGISTRY=... TAG=${version}"
