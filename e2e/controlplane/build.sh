#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok and helm
# from the Go modules pinned beside this script into a per-version cache folder, skipping what is
# there; and draref (kube/draref: kube-scheduler's DRA allocator on cases read from stdin, for
# tests/devices' differential test), named by a hash of its source so an edit builds it again
# (tests/devices/draref.py computes the same name).
# Prints the folder that holds the binaries (one line) on stdout; logs go to stderr.
#
#   build.sh            the control plane's binaries, helm and draref
#   build.sh frontends  Kueue's and JobSet's controller managers (frontends/go.mod), into a folder of
#                       their own named by their versions: only the live tests of the controllers
#                       users run in front of koordpy need them, and a change of their versions
#                       must not rebuild the control plane (nor the reverse)
#
#   KOORDPY_CACHE  cache root (default ~/.cache/koordpy)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KOORDPY_CACHE:-$HOME/.cache/koordpy}
command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl)" >&2; exit 1; }
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"  # the commands built are not this repository's
what=${1:-controlplane}
case $what in controlplane|frontends) ;; *) echo "build.sh: unknown argument $what (frontends or none)" >&2; exit 2;; esac

version_of() { (cd "$here/$1" && go list -m -f '{{.Version}}' "$2"); }

# Two builds at once (a test suite and a benchmark, say) must not trip over each other: one waits
# for the other's lock, and each writes its own partial file, so neither can move the other's away.
lock() {
  if command -v flock >/dev/null; then
    exec 9>"$bindir/.build.lock"
    flock -w 3600 9 || { echo "build.sh: another build has held $bindir/.build.lock for an hour; giving up" >&2; exit 1; }
  fi
}

note="the whole first build takes about 15 minutes on 2 cores"
build() {  # name module package ldflags
  local out="$bindir/$1"
  if [ -x "$out" ]; then return; fi
  echo "build.sh: building $1 (first time only; $note)" >&2
  local start=$SECONDS
  (cd "$here/$2" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $4" -o "$out.partial.$$" "$3")
  mv -f "$out.partial.$$" "$out"
  echo "build.sh: built $1 in $((SECONDS - start))s" >&2
}

if [ "$what" = frontends ]; then
  kueue=$(version_of frontends sigs.k8s.io/kueue)
  jobset=$(version_of frontends sigs.k8s.io/jobset)
  bindir="$cache/frontends-kueue$kueue-jobset$jobset"
  mkdir -p "$bindir"
  lock
  note="Kueue and JobSet, 5 minutes more on 2 idle cores, nearly all of it Kueue"
  build kueue frontends sigs.k8s.io/kueue/cmd/kueue "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue"
  build jobset frontends sigs.k8s.io/jobset "-X sigs.k8s.io/jobset/pkg/version.GitVersion=$jobset"
  echo "$bindir"
  exit 0
fi

k8s=$(version_of kube k8s.io/kubernetes)
etcd=$(version_of etcd go.etcd.io/etcd/server/v3)
kwok=$(version_of kwok sigs.k8s.io/kwok)
helm=$(version_of helm helm.sh/helm/v3)
bindir="$cache/controlplane-k8s$k8s-etcd$etcd-kwok$kwok-helm$helm"
mkdir -p "$bindir"

k8s_minor=${k8s#v1.}; k8s_minor=${k8s_minor%%.*}
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

lock

build etcd etcd go.etcd.io/etcd/server/v3 "-X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd"
build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
build kubectl kube k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok ""
# Its packages are kube-scheduler's, compiled already: a fresh build adds about a link's time.
draref_hash=$(cat "$here/kube/draref/main.go" "$here/kube/go.sum" | sha256sum | cut -c1-16)
build "draref-$draref_hash" kube ./draref ""
build helm helm helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=$helm"
echo "$bindir"
