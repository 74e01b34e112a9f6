#!/usr/bin/env bash
# `make image`: the container image, built without a daemon from Debian packages only.
#
# Usage: tools/image/build.sh /abs/path/to/gpu-memory-guard [OUT_DIR]   (OUT_DIR default: the
#        binary's folder)
#        tools/image/build.sh --rootfs    (step 1 only: the cached root filesystem)
#        tools/image/build.sh --spec      (what is read from the Dockerfile, one "key value" a line)
#
# The Dockerfile's runtime stage is the one description of the image: this script reads its
# apt-get package list, LABELs, USER, EXPOSE, ENTRYPOINT and CMD, and stops on any instruction of
# that stage it does not reproduce (so the two cannot drift; test/e2e/install-proof.sh checks the
# list against the binary's DT_NEEDED). Steps:
# 1. root filesystem: `debootstrap --variant=minbase bookworm` with those packages, upgraded from
#    bookworm-security and bookworm-updates, docs/man/locales removed as debian:12-slim does,
#    logs and apt lists dropped. Cached in $GMG_CACHE/image-rootfs/KEY (KEY: a hash of the
#    package list and of this script's rootfs step), like the Kubernetes tools: a changed list
#    rebuilds it. GMG_IMAGE_REFRESH=1 rebuilds it anyway (newer security updates).
# 2. the binary in /usr/local/bin, an SPDX 2.3 SBOM of the root filesystem's dpkg database (with
#    versions) in /usr/share/doc/gpu-memory-guard/sbom.spdx.json; `chroot ROOT gpu-memory-guard
#    version` proves every library it links resolves inside the image, and each DT_NEEDED entry
#    maps (in the image's dpkg database) to a package of the Dockerfile's list or libc6.
# 3. one layer: GNU tar with sorted names, numeric owners and every mtime set to
#    SOURCE_DATE_EPOCH (default: the commit's time), added with `umoci raw add-layer`; the config
#    (user, entrypoint, cmd, ports, labels, created = SOURCE_DATE_EPOCH) with `umoci config`.
# 4. OUT_DIR/gpu-memory-guard-image.oci.tar: the OCI image layout as an archive (sorted, fixed
#    mtimes), for `skopeo copy oci-archive:... docker://...`; the SBOM beside it
#    (gpu-memory-guard-image.spdx.json); the digests in gpu-memory-guard-image.digests and on
#    stdout.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
DOCKERFILE="$REPO_ROOT/Dockerfile"
GMG_CACHE=${GMG_CACHE:-$HOME/.cache/gpu-memory-guard}
SUITE=bookworm
MIRROR=${GMG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${GMG_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
NAME=gpu-memory-guard-image
TAG=latest

log() { printf '%s image: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# A command that fails without a word (set -e) still says where.
trap 'log "ERROR: line $LINENO: exit status $? (set -e)"' ERR

# --- the Dockerfile's runtime stage -----------------------------------------------------------

# The last stage, continuation lines joined, comments dropped.
runtime_stage() {
	awk '/^FROM /{ buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$DOCKERFILE" |
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -vE '^\s*(#|$)' | sed -E 's/[[:space:]]+/ /g; s/ $//'
}

# Prints "key value" lines: package NAME, label KEY=VALUE, user U:G, expose PORT, entrypoint
# JSON, cmd JSON. Fails on an instruction the daemonless build does not reproduce.
spec() {
	local line kw rest version revision
	version=$(sed -n 's/^ARG VERSION=//p' "$DOCKERFILE" | tail -n 1)
	revision=$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
	while IFS= read -r line; do
		kw=${line%% *}
		rest=${line#* }
		case $kw in
		FROM | ARG) ;;
		LABEL)
			# key="value" pairs; ${VERSION} and ${REVISION} as the build args would give them.
			grep -oE '[a-z0-9.-]+="[^"]*"' <<<"$rest" | sed -e 's/"//g' \
				-e "s/\${VERSION}/$version/g" -e "s/\${REVISION}/$revision/g" | sed 's/^/label /'
			;;
		RUN)
			[[ $rest == "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "*" && rm -rf /var/lib/apt/lists/*" ]] ||
				die "Dockerfile runtime stage: RUN line not reproduced by tools/image/build.sh: $rest"
			rest=${rest#*--no-install-recommends }
			rest=${rest%% && *}
			tr -s ' ' '\n' <<<"$rest" | grep -v '^$' | sed 's/^/package /'
			;;
		COPY)
			[ "$rest" = "--from=builder /src/build/gpu-memory-guard /usr/local/bin/gpu-memory-guard" ] ||
				die "Dockerfile runtime stage: COPY not reproduced by tools/image/build.sh: $rest"
			;;
		USER) echo "user $rest" ;;
		EXPOSE) tr -s ' ' '\n' <<<"$rest" | sed 's/^/expose /' ;;
		ENTRYPOINT) echo "entrypoint $(jq -c . <<<"$rest")" ;;
		CMD) echo "cmd $(jq -c . <<<"$rest")" ;;
		*) die "Dockerfile runtime stage: $kw not reproduced by tools/image/build.sh" ;;
		esac
	done < <(runtime_stage)
}

if [ "${1:-}" = --spec ]; then
	spec
	exit 0
fi

# --rootfs: only step 1, the cached root filesystem (no binary needed): `make test` makes it in
# the background while the fast tests run.
ROOTFS_ONLY=0
if [ "${1:-}" = --rootfs ]; then
	ROOTFS_ONLY=1
else
	BINARY=${1:-}
	[ -n "$BINARY" ] && [ -x "$BINARY" ] || die "usage: $0 /abs/path/to/gpu-memory-guard [OUT_DIR] | --rootfs | --spec"
	BINARY=$(readlink -f "$BINARY")
	OUT=$(mkdir -p "${2:-$(dirname "$BINARY")}" && cd "${2:-$(dirname "$BINARY")}" && pwd)
fi
[ "$(id -u)" = 0 ] || die "debootstrap and chroot need root"
for t in debootstrap umoci jq tar; do command -v $t >/dev/null || die "$t missing (bash .ci/install-deps.sh)"; done

T0=$SECONDS
SPEC=$(spec)
PACKAGES=$(awk '$1 == "package" { print $2 }' <<<"$SPEC" | sort -u)
[ -n "$PACKAGES" ] || die "no package list read from the Dockerfile's runtime stage"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO_ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

# --- 1. root filesystem (cached) ---------------------------------------------------------------

# The rootfs step, as text: part of the cache key, so a change to it rebuilds.
make_rootfs() { # DIR
	local root=$1
	debootstrap --variant=minbase --include="$(paste -sd, <<<"$PACKAGES")" "$SUITE" "$root" "$MIRROR" \
		>"$root.debootstrap.log" 2>&1 || { tail -n 20 "$root.debootstrap.log" >&2; return 1; }
	cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
	chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C sh -c 'apt-get update -q &&
		apt-get -y -q dist-upgrade && apt-get clean' >>"$root.debootstrap.log" 2>&1 ||
		{ tail -n 20 "$root.debootstrap.log" >&2; return 1; }
	# What debian:12-slim leaves out (its dpkg path-exclude list), and what says when it was built.
	find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$root"/usr/share/{man,info,locale,lintian,linda}/* "$root"/var/lib/apt/lists/* \
		"$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old \
		"$root"/var/log/* "$root"/tmp/* "$root"/root/.bash_history "$root/etc/machine-id" \
		"$root"/etc/*- "$root"/var/lib/dpkg/info/*.list.tmp 2>/dev/null || true
	# The password database's "last changed" field is the day it was written: fixed to bookworm's
	# release day (2023-06-10), so that two root filesystems made on other days are the same.
	[ ! -f "$root/etc/shadow" ] || sed -i -E 's/^([^:]*:[^:]*:)[0-9]+:/\119518:/' "$root/etc/shadow"
	rm -f "$root.debootstrap.log"
}
KEY=$( (echo "$SUITE minbase $MIRROR $SECURITY_MIRROR"; echo "$PACKAGES"; declare -f make_rootfs) | sha256sum | cut -c1-16)
ROOTFS_CACHE="$GMG_CACHE/image-rootfs/$KEY"
# One build at a time makes, prunes or copies the cache (two work trees on one machine share it).
mkdir -p "$GMG_CACHE/image-rootfs"
exec 9>"$GMG_CACHE/image-rootfs.lock"
flock 9
if [ "${GMG_IMAGE_REFRESH:-0}" = 1 ] || [ ! -f "$ROOTFS_CACHE/ok" ]; then
	log "root filesystem: debootstrap --variant=minbase $SUITE + $(paste -sd' ' <<<"$PACKAGES") (cache key $KEY)"
	t=$SECONDS
	rm -rf "$ROOTFS_CACHE" && mkdir -p "$ROOTFS_CACHE"
	make_rootfs "$ROOTFS_CACHE/rootfs"
	touch "$ROOTFS_CACHE/ok"
	# Older keys (an older package list) are not needed any more.
	find "$GMG_CACHE/image-rootfs" -mindepth 1 -maxdepth 1 -type d -not -name "$KEY" -exec rm -rf {} +
	log "root filesystem made in $((SECONDS - t))s, cached in $ROOTFS_CACHE"
else
	log "root filesystem from the cache ($ROOTFS_CACHE)"
fi
[ $ROOTFS_ONLY = 0 ] || exit 0

# --- 2. the image's files ----------------------------------------------------------------------

WORK="$OUT/image-work"
rm -rf "$WORK" && mkdir -p "$WORK"
ROOT="$WORK/rootfs"
cp -a "$ROOTFS_CACHE/rootfs" "$ROOT"
exec 9>&-
# What differs between two debootstraps of the same packages (ldconfig's inode/ctime cache), and
# the device nodes debootstrap made (the runtime mounts /dev; an unprivileged unpack cannot mknod).
rm -rf "$ROOT/var/cache/ldconfig/aux-cache" "$ROOT"/dev/*
install -m 0755 "$BINARY" "$ROOT/usr/local/bin/gpu-memory-guard"
chroot "$ROOT" /usr/local/bin/gpu-memory-guard version >"$WORK/version" 2>&1 ||
	die "the binary does not run inside the image's root filesystem: $(cat "$WORK/version")"
# Every library the binary links (DT_NEEDED) resolves in the image to a file of a package the
# Dockerfile installs (or of libc6, which every Debian root has).
needed=""
for lib in $(objdump -p "$BINARY" | awk '/NEEDED/ { print $2 }'); do
	# awk reads to the end: leaving early would kill ldconfig with SIGPIPE in mid-output (it
	# writes 4 KiB at a time), which pipefail turns into a silent exit of this script.
	path=$(ldconfig -r "$ROOT" -p | awk -v l="$lib" '$1 == l && p == "" { p = $NF } END { print p }')
	[ -n "$path" ] || die "$lib (DT_NEEDED) is not in the image"
	pkg=$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -S "$(chroot "$ROOT" readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
	[ -n "$pkg" ] || pkg=$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
	case " libc6 $(echo $PACKAGES) " in
	*" $pkg "*) needed="$needed $lib=$pkg" ;;
	*) die "$lib (DT_NEEDED) comes from ${pkg:-no package}, which the Dockerfile's runtime stage does not install" ;;
	esac
done
log "DT_NEEDED -> package:$needed"
VERSION=$(awk '$1 == "label" && $2 ~ /^org.opencontainers.image.version=/ { sub(/^[^=]*=/, "", $2); print $2 }' <<<"$SPEC")

# SPDX 2.3: the image, the gpu-memory-guard binary, and every Debian package of the dpkg database.
sbom() {
	dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\t${Source}\t${Maintainer}\n' |
		awk -F'\t' '$1 ~ /^ii/' | sort -t$'\t' -k2,2 |
		jq -R -s --arg name "$NAME" --arg created "$CREATED" --arg version "$VERSION" \
			--arg revision "$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)" \
			--arg bin_sha "$(sha256sum "$BINARY" | cut -d' ' -f1)" '
		def spdxid: gsub("[^A-Za-z0-9.-]"; "-");
		[split("\n")[] | select(length > 0) | split("\t") |
		 {name: .[1], version: .[2], arch: .[3], source: (.[4] | split(" ")[0]), maintainer: .[5]}] as $debs |
		{spdxVersion: "SPDX-2.3", dataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		 name: $name,
		 documentNamespace: "https://gpu-memory-guard.invalid/spdx/\($name)-\($revision)-\($bin_sha[0:16])",
		 creationInfo: {created: $created, creators: ["Tool: gpu-memory-guard tools/image/build.sh"]},
		 packages: ([{name: "gpu-memory-guard", SPDXID: "SPDXRef-gpu-memory-guard", versionInfo: $version,
		   downloadLocation: "NOASSERTION", filesAnalyzed: false, licenseConcluded: "NOASSERTION",
		   licenseDeclared: "NOASSERTION", copyrightText: "NOASSERTION",
		   checksums: [{algorithm: "SHA256", checksumValue: $bin_sha}],
		   comment: "/usr/local/bin/gpu-memory-guard, commit \($revision)"}] +
		  [$debs[] | {name, SPDXID: ("SPDXRef-deb-\(.name)-\(.arch)" | spdxid), versionInfo: .version,
		   supplier: "Organization: \(.maintainer)", downloadLocation: "NOASSERTION", filesAnalyzed: false,
		   licenseConcluded: "NOASSERTION", licenseDeclared: "NOASSERTION", copyrightText: "NOASSERTION",
		   sourceInfo: "Debian source package \(if .source == "" then .name else .source end)",
		   externalRefs: [{referenceCategory: "PACKAGE-MANAGER", referenceType: "purl",
		     referenceLocator: "pkg:deb/debian/\(.name)@\(.version | @uri)?arch=\(.arch)&distro=debian-12"}]}]),
		 relationships: ([{spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES",
		   relatedSpdxElement: "SPDXRef-gpu-memory-guard"}] +
		  [$debs[] | {spdxElementId: "SPDXRef-gpu-memory-guard", relationshipType: "DEPENDS_ON",
		   relatedSpdxElement: ("SPDXRef-deb-\(.name)-\(.arch)" | spdxid)}])}'
}
mkdir -p "$ROOT/usr/share/doc/gpu-memory-guard"
sbom >"$OUT/$NAME.spdx.json"
[ "$(jq '.packages | length' "$OUT/$NAME.spdx.json")" -gt 1 ] || die "the SBOM lists no Debian package"
cp "$OUT/$NAME.spdx.json" "$ROOT/usr/share/doc/gpu-memory-guard/sbom.spdx.json"

# --- 3. the layer and the config -----------------------------------------------------------------

# Sorted names, numeric owners, fixed mtimes, no atime/ctime: the same files give the same bytes.
(cd "$ROOT" && tar --sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime --format=posix \
	-cf "$WORK/layer.tar" .)
LAYOUT="$WORK/oci"
umoci init --layout "$LAYOUT"
umoci new --image "$LAYOUT:$TAG"
umoci raw add-layer --image "$LAYOUT:$TAG" --history.created "$CREATED" \
	--history.created_by "tools/image/build.sh: debootstrap --variant=minbase $SUITE + packages of the Dockerfile, the binary, the SBOM" \
	"$WORK/layer.tar"
cfg=(--created "$CREATED" --os linux --architecture "$(dpkg --print-architecture)" --no-history)
cfg+=(--config.user "$(awk '$1 == "user" { print $2 }' <<<"$SPEC")")
cfg+=(--config.entrypoint "$(awk '$1 == "entrypoint" { print $2 }' <<<"$SPEC" | jq -r '.[0]')")
[ "$(awk '$1 == "entrypoint" { print $2 }' <<<"$SPEC" | jq length)" = 1 ] || die "ENTRYPOINT with arguments is not handled"
while read -r c; do cfg+=(--config.cmd "$c"); done < <(awk '$1 == "cmd" { print $2 }' <<<"$SPEC" | jq -r '.[]')
while read -r p; do cfg+=(--config.exposedports "$p/tcp"); done < <(awk '$1 == "expose" { print $2 }' <<<"$SPEC")
while read -r l; do
	# base.name names debian:12-slim, the Dockerfile's base: this image is not built on it.
	case $l in org.opencontainers.image.base.name=*) continue ;; esac
	cfg+=(--config.label "$l")
done < <(awk '$1 == "label" { sub(/^label /, ""); print }' <<<"$SPEC")
cfg+=(--config.label "org.opencontainers.image.created=$CREATED")
cfg+=(--config.env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
umoci config --image "$LAYOUT:$TAG" "${cfg[@]}"
umoci gc --layout "$LAYOUT"

# --- 4. the archive ----------------------------------------------------------------------------

ARCHIVE="$OUT/$NAME.oci.tar"
(cd "$LAYOUT" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
	--format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	-cf "$ARCHIVE.tmp" oci-layout index.json blobs)
mv "$ARCHIVE.tmp" "$ARCHIVE"
blob() { cat "$LAYOUT/blobs/${1%%:*}/${1#*:}"; }
MANIFEST=$(jq -r '.manifests[0].digest' "$LAYOUT/index.json")
CONFIG=$(blob "$MANIFEST" | jq -r .config.digest)
LAYER=$(blob "$MANIFEST" | jq -r '.layers[0].digest')
DIFF_ID=$(blob "$CONFIG" | jq -r '.rootfs.diff_ids[0]')
{
	echo "manifest $MANIFEST"
	echo "config $CONFIG"
	echo "layer $LAYER"
	echo "layer-diff-id $DIFF_ID"
	echo "archive sha256:$(sha256sum "$ARCHIVE" | cut -d' ' -f1)"
	echo "archive-bytes $(stat -c %s "$ARCHIVE")"
	echo "rootfs-bytes $(du -sb "$ROOT" | cut -f1)"
	echo "source-date-epoch $SOURCE_DATE_EPOCH"
} >"$OUT/$NAME.digests"
rm -rf "$ROOT" "$WORK/layer.tar"
log "built in $((SECONDS - T0))s: $ARCHIVE ($(($(stat -c %s "$ARCHIVE") / 1048576)) MiB; unpacked $(($(awk '$1 == "rootfs-bytes" { print $2 }' "$OUT/$NAME.digests") / 1048576)) MiB), SBOM $OUT/$NAME.spdx.json"
cat "$OUT/$NAME.digests"
