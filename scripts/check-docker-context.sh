#!/usr/bin/env bash
# Checks, without a Docker engine, that the Docker build context holds everything the image
# build needs. From the Dockerfile it reads the COPY/ADD lines that take files from the
# context (COPY --from=... is skipped): every source of every stage must exist and not be
# excluded by .dockerignore. The sources copied by the build stage (`FROM ... AS build`) are
# then laid out in an empty temporary directory as the stage's WORKDIR would hold them (with
# .dockerignore's exclusions), and there it runs
#     cargo metadata --locked --format-version 1
#     cargo fetch --locked                            # the manifest as a build loads it
#     cargo check --locked --release -p PACKAGE        # room-service unless told otherwise
# Any missing file fails the run with a message naming the problem.
#
#   scripts/check-docker-context.sh [DOCKERFILE]   # default: the repository's Dockerfile
#   scripts/check-docker-context.sh --self-test    # broken contexts must fail, then the real one
#
# The context is always the repository root. Environment: DOCKER_CONTEXT_DOCKERFILE (instead
# of the argument), DOCKER_CONTEXT_DOCKERIGNORE (default: .dockerignore at the root),
# DOCKER_CONTEXT_STAGE (default: build), DOCKER_CONTEXT_PACKAGE (default: room-service; the
# fakes' image builds room-service-fakes, with fakes/Dockerfile.dockerignore). Build-stage
# `ARG NAME=default` values are exported unless the environment already sets NAME
# (ROOM_SERVICE_GIT_COMMIT=unknown, as in a plain `docker build`). cargo builds into
# ${CARGO_TARGET_DIR:-target}/docker-context-check, so repeated runs only re-check our crates;
# it uses the usual cargo registry (set CARGO_NET_OFFLINE=true to forbid the network).
#
# Not modelled: variables in COPY sources, heredocs, COPY --parents/--exclude, ADD of URLs or
# archive extraction, Dockerfile-specific ignore files (pass one in DOCKER_CONTEXT_DOCKERIGNORE),
# and ENV of the build stage.
set -euo pipefail
shopt -s dotglob nullglob

repo=$(cd "$(dirname "$0")/.." && pwd)
self="$repo/scripts/$(basename "$0")"
name=check-docker-context

die() {
    echo "$name: FAIL: $*" >&2
    exit 1
}

usage() {
    sed -n '2,/^set -euo/p' "$self" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# ---- paths and .dockerignore ------------------------------------------------------------

# Lexically cleaned relative path (like Go's filepath.Clean, leading / dropped): "" is the
# root; a path climbing out of the root prints nothing and returns 1.
clean_path() {
    local IFS=/ part
    local -a parts out=()
    read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        case $part in
            '' | .) ;;
            ..)
                [ ${#out[@]} -gt 0 ] || return 1
                unset 'out[${#out[@]}-1]'
                ;;
            *) out+=("$part") ;;
        esac
    done
    printf '%s' "${out[*]}"
}

# A .dockerignore pattern as an anchored ERE, the way Docker's pattern matcher reads it:
# `*` and `?` stop at /, `**` crosses directories, `[...]` and `\x` pass through.
pattern_to_ere() {
    local p=$1 re='^' c i=0 n=${#1}
    while [ "$i" -lt "$n" ]; do
        c=${p:i:1}
        case $c in
            '*')
                if [ "${p:i+1:1}" = '*' ]; then
                    i=$((i + 1))
                    [ "${p:i+1:1}" != / ] || i=$((i + 1))
                    if [ $((i + 1)) -ge "$n" ]; then re+='.*'; else re+='(.*/)?'; fi
                else
                    re+='[^/]*'
                fi
                ;;
            '?') re+='[^/]' ;;
            \\)
                i=$((i + 1))
                re+="\\${p:i:1}"
                ;;
            '[')
                # A bracket expression up to its closing ], copied as is.
                local rest=${p:i} class
                if [[ $rest =~ ^(\[\^?\]?[^]]*\]) ]]; then
                    class=${BASH_REMATCH[1]}
                    re+=$class
                    i=$((i + ${#class} - 1))
                else
                    re+='\['
                fi
                ;;
            . | + | '(' | ')' | '|' | '{' | '}' | '^' | '$') re+="\\$c" ;;
            *) re+=$c ;;
        esac
        i=$((i + 1))
    done
    printf '%s$' "$re"
}

ignore_re=()   # one ERE per pattern, in file order
ignore_neg=()  # 1 for an exception (!pattern)
ignore_raw=()  # the cleaned pattern
load_dockerignore() {
    local line neg pat
    [ -f "$1" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%$'\r'}
        [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
        line=${line#"${line%%[![:space:]]*}"}
        line=${line%"${line##*[![:space:]]}"}
        neg=0
        if [ "${line:0:1}" = '!' ]; then
            neg=1
            line=${line:1}
        fi
        pat=$(clean_path "$line") || pat=''
        [ -n "$pat" ] || continue
        ignore_re+=("$(pattern_to_ere "$pat")")
        ignore_neg+=("$neg")
        ignore_raw+=("$pat")
    done <"$1"
}

# Whether .dockerignore keeps PATH (relative to the context) out of the context: the last
# pattern matching PATH or one of its parent directories decides (Docker's rule).
ignored() {
    local path=$1 k re match prefix excluded=0
    local IFS=/
    local -a dirs
    read -ra dirs <<<"$path"
    for k in "${!ignore_re[@]}"; do
        # Only a pattern that could change the verdict is evaluated.
        if [ "${ignore_neg[k]}" -eq 1 ] && [ "$excluded" -eq 0 ]; then continue; fi
        if [ "${ignore_neg[k]}" -eq 0 ] && [ "$excluded" -eq 1 ]; then continue; fi
        re=${ignore_re[k]}
        match=0
        if [[ $path =~ $re ]]; then
            match=1
        else
            prefix=''
            local d
            for d in "${dirs[@]:0:${#dirs[@]}-1}"; do
                prefix=${prefix:+$prefix/}$d
                if [[ $prefix =~ $re ]]; then
                    match=1
                    break
                fi
            done
        fi
        if [ "$match" -eq 1 ]; then
            excluded=$((1 - ignore_neg[k]))
        fi
    done
    [ "$excluded" -eq 1 ]
}

# Whether an exception pattern might bring back something under the ignored directory DIR
# (so that the directory must still be walked).
may_reinclude_under() {
    local dir=$1 k raw depth
    local IFS=/
    local -a dparts pparts
    read -ra dparts <<<"$dir"
    depth=${#dparts[@]}
    for k in "${!ignore_re[@]}"; do
        [ "${ignore_neg[k]}" -eq 1 ] || continue
        raw=${ignore_raw[k]}
        [[ $raw != *'**'* ]] || return 0
        read -ra pparts <<<"$raw"
        [ ${#pparts[@]} -gt "$depth" ] || continue
        local head="${pparts[*]:0:depth}"
        local re
        re=$(pattern_to_ere "$head")
        [[ ! $dir =~ $re ]] || return 0
    done
    return 1
}

# Copies the context directory SRC (relative) into DEST (absolute), without what .dockerignore
# excludes.
copy_tree() {
    local src=$1 dest=$2 entry rel
    mkdir -p "$dest"
    for entry in "$repo${src:+/$src}"/*; do
        rel=${src:+$src/}${entry##*/}
        if [ -d "$entry" ] && [ ! -L "$entry" ]; then
            if ignored "$rel" && ! may_reinclude_under "$rel"; then continue; fi
            copy_tree "$rel" "$dest/${entry##*/}"
        elif ! ignored "$rel"; then
            cp -P --preserve=mode,timestamps "$entry" "$dest/${entry##*/}"
        fi
    done
}

# ---- the Dockerfile ---------------------------------------------------------------------

# The Dockerfile's instructions, one logical line each (continuations joined, comment and
# blank lines dropped).
read_instructions() {
    local line acc=''
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%$'\r'}
        [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
        if [[ $line =~ ^(.*)\\[[:space:]]*$ ]]; then
            acc+="${BASH_REMATCH[1]} "
            continue
        fi
        printf '%s\n' "$acc$line"
        acc=''
    done <"$1"
    [ -z "$acc" ] || printf '%s\n' "$acc"
}

# Splits the arguments of COPY/ADD (after the flags), shell or JSON form, into ARGS.
split_args() {
    local text=$1 item
    args=()
    if [[ $text =~ ^[[:space:]]*\[(.*)\][[:space:]]*$ ]]; then
        local IFS=,
        local -a items
        read -ra items <<<"${BASH_REMATCH[1]}"
        for item in "${items[@]}"; do
            [[ $item =~ ^[[:space:]]*\"(.*)\"[[:space:]]*$ ]] ||
                die "cannot read the JSON-form COPY arguments: $text"
            args+=("${BASH_REMATCH[1]}")
        done
    else
        read -ra args <<<"$text"
    fi
}

# ---- the check --------------------------------------------------------------------------

check() {
    local dockerfile=$1
    local dockerignore=${DOCKER_CONTEXT_DOCKERIGNORE:-$repo/.dockerignore}
    local stage=${DOCKER_CONTEXT_STAGE:-build}
    [ -f "$dockerfile" ] || die "no Dockerfile at $dockerfile"
    load_dockerignore "$dockerignore"

    local -a instructions words copy_line=() copy_stage=() copy_workdir=() copy_dest=() copy_srcs=()
    local instr kw in_stage=0 found_stage=0 workdir=/ final_workdir=/ i n rest w
    mapfile -t instructions < <(read_instructions "$dockerfile")
    for instr in "${instructions[@]}"; do
        read -ra words <<<"$instr"
        kw=${words[0]^^}
        case $kw in
            FROM)
                in_stage=0
                n=${#words[@]}
                if [ "$n" -ge 4 ] && [ "${words[n - 2]^^}" = AS ] && [ "${words[n - 1]}" = "$stage" ]; then
                    in_stage=1
                    found_stage=1
                    workdir=/
                fi
                ;;
            WORKDIR)
                [ "$in_stage" -eq 1 ] || continue
                rest=${instr#*[[:space:]]}
                rest=${rest#"${rest%%[![:space:]]*}"}
                rest=${rest%"${rest##*[![:space:]]}"}
                [[ $rest != *'$'* ]] || die "WORKDIR with a variable is not supported: $instr"
                [ "${rest:0:1}" = / ] || rest=$workdir/$rest
                workdir=/$(clean_path "$rest") || die "bad WORKDIR: $instr"
                final_workdir=$workdir
                ;;
            ARG)
                [ "$in_stage" -eq 1 ] || continue
                for w in "${words[@]:1}"; do
                    local arg_name=${w%%=*}
                    [[ $arg_name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "cannot read: $instr"
                    if [[ $w == *=* ]] && [ -z "${!arg_name+set}" ]; then
                        local arg_value=${w#*=}
                        arg_value=${arg_value#\"}
                        arg_value=${arg_value%\"}
                        export "$arg_name=$arg_value"
                    fi
                done
                ;;
            COPY | ADD)
                local from=0
                i=1
                while [ "$i" -lt "${#words[@]}" ] && [ "${words[i]:0:2}" = -- ]; do
                    [[ ${words[i]} != --from=* ]] || from=1
                    [[ ${words[i]} != --parents* && ${words[i]} != --exclude=* ]] ||
                        die "$kw ${words[i]} is not supported by this check: $instr"
                    i=$((i + 1))
                done
                [ "$from" -eq 0 ] || continue
                rest=${instr#*[[:space:]]}
                local j
                for ((j = 1; j < i; j++)); do
                    rest=${rest#"${rest%%[![:space:]]*}"}
                    rest=${rest#"${words[j]}"}
                done
                local -a args
                split_args "$rest"
                [ ${#args[@]} -ge 2 ] || die "$kw needs a source and a destination: $instr"
                copy_line+=("$instr")
                copy_stage+=("$in_stage")
                copy_workdir+=("$workdir")
                copy_dest+=("${args[${#args[@]} - 1]}")
                local joined
                printf -v joined '%s\x1f' "${args[@]:0:${#args[@]}-1}"
                copy_srcs+=("$joined")
                ;;
        esac
    done
    [ "$found_stage" -eq 1 ] || die "$dockerfile has no stage named '$stage' (FROM ... AS $stage)"

    # Every context source of every stage must be in the context.
    local ctx
    ctx=$(mktemp -d "${TMPDIR:-/tmp}/docker-context.XXXXXX")
    # shellcheck disable=SC2064 # the path is fixed now
    trap "rm -rf '$ctx'" EXIT
    local c src srcpath m dest abs reldest target count
    local -a srcs matches
    for c in "${!copy_srcs[@]}"; do
        IFS=$'\x1f' read -ra srcs <<<"${copy_srcs[c]}"
        matches=()
        for src in "${srcs[@]}"; do
            [[ $src != *'$'* ]] || die "COPY source with a variable is not supported: $src"
            [[ $src != '<<'* ]] || die "COPY heredocs are not supported: $src"
            if [[ $src =~ ^[a-z]+:// ]]; then continue; fi
            srcpath=$(clean_path "$src") || die "COPY source $src is outside the context"
            if [[ $srcpath == *[\*?[]* ]]; then
                # A wildcard may match nothing (BuildKit allows it) ...
                local -a globbed=()
                # shellcheck disable=SC2206 # deliberate pathname expansion
                globbed=("$repo"/$srcpath)
                for m in "${globbed[@]}"; do
                    m=${m#"$repo"/}
                    ignored "$m" || matches+=("$m")
                done
            else
                # ... a plain path must be in the context.
                [ -e "$repo/$srcpath" ] || [ -z "$srcpath" ] ||
                    die "COPY source '$src' does not exist in the context (${copy_line[c]})"
                if [ -n "$srcpath" ] && ignored "$srcpath"; then
                    die "COPY source '$src' is excluded by $(basename "$dockerignore"), so it is not in the build context"
                fi
                matches+=("$srcpath")
            fi
        done
        [ ${#matches[@]} -gt 0 ] || [[ ${srcs[*]} =~ :// ]] ||
            die "no file in the context matches ${copy_line[c]}"
        [ "${copy_stage[c]}" -eq 1 ] || continue

        # Lay the build stage's sources out under its final WORKDIR.
        dest=${copy_dest[c]}
        [[ $dest != *'$'* ]] || die "COPY destination with a variable is not supported: $dest"
        [ "${dest:0:1}" = / ] || dest=${copy_workdir[c]}/$dest
        abs=/$(clean_path "$dest") || die "bad COPY destination: $dest"
        case $abs/ in
            "${final_workdir%/}"/*) reldest=${abs#"${final_workdir%/}"} ;;
            *) die "COPY destination $abs is outside the build WORKDIR $final_workdir; this check cannot lay it out" ;;
        esac
        target=$ctx$reldest
        count=${#matches[@]}
        for m in "${matches[@]}"; do
            if [ -z "$m" ] || { [ -d "$repo/$m" ] && [ ! -L "$repo/$m" ]; }; then
                copy_tree "$m" "$target"
            else
                # Into a directory when several sources, a trailing / or an existing directory.
                if [ "$count" -gt 1 ] || [ "${copy_dest[c]: -1}" = / ] || [ -d "$target" ]; then
                    mkdir -p "$target"
                    cp -P --preserve=mode,timestamps "$repo/$m" "$target/${m##*/}"
                else
                    mkdir -p "$(dirname "$target")"
                    cp -P --preserve=mode,timestamps "$repo/$m" "$target"
                fi
            fi
        done
    done

    local files
    files=$(find "$ctx" -type f | wc -l)
    echo "$name: $(basename "$dockerfile"), stage '$stage': $files files laid out as $final_workdir"

    local target_dir=${CARGO_TARGET_DIR:-$repo/target}/docker-context-check
    local package=${DOCKER_CONTEXT_PACKAGE:-room-service}
    (
        cd "$ctx"
        # No .git in a Docker build: git (say, in a build script) must not find one above.
        export GIT_CEILING_DIRECTORIES=$ctx
        export CARGO_TARGET_DIR=$target_dir
        cargo metadata --locked --format-version 1 >/dev/null ||
            die "cargo metadata fails in the context built from $dockerfile: Cargo.toml or Cargo.lock is missing or does not match (see cargo's error above)"
        # cargo metadata tolerates a declared target whose file is missing (it drops the
        # target); cargo fetch loads the manifest as a build does, before compiling anything.
        cargo fetch --locked ||
            die "cargo refuses the manifest in the context built from $dockerfile: a file it names (a bench, bin, build script...) is not in the build context, or the locked dependencies cannot be fetched (see cargo's error above)"
        cargo check --locked --release -p "$package" ||
            die "cargo check --release -p $package fails in the context built from $dockerfile: the build context lacks a file the build needs (see cargo's error above)"
    )
    echo "$name: OK: the build context of $dockerfile builds $package"
}

# ---- self-test --------------------------------------------------------------------------

# Runs the check on a broken variant, which must fail with EXPECTED in its output.
expect_failure() {
    local what=$1 expected=$2 log status=0
    shift 2
    log=$(mktemp)
    "$@" >"$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
        cat "$log" >&2
        rm -f "$log"
        die "self-test: the check passed $what"
    fi
    if ! grep -qF -- "$expected" "$log"; then
        cat "$log" >&2
        rm -f "$log"
        die "self-test: the check failed $what, but not with \"$expected\""
    fi
    rm -f "$log"
    echo "$name: self-test: fails as it should $what"
}

self_test() {
    local dir no_src no_migrations
    dir=$(mktemp -d)
    # shellcheck disable=SC2064 # the path is fixed now
    trap "rm -rf '$dir'" EXIT

    # A Dockerfile without the COPY lines matching PATTERN (which must exist).
    without() {
        grep -Eiv "^[[:space:]]*COPY[[:space:]].*$1" "$repo/Dockerfile" >"$dir/Dockerfile.no-$1" || true
        ! cmp -s "$repo/Dockerfile" "$dir/Dockerfile.no-$1" ||
            die "self-test: the Dockerfile has no COPY line matching '$1' to remove"
        printf '%s' "$dir/Dockerfile.no-$1"
    }

    # Without src/, the manifest has no target: caught before anything compiles.
    no_src=$(without src)
    expect_failure "without COPY src" "cargo metadata fails" \
        bash "$self" "$no_src"

    # A .dockerignore that keeps migrations/ out: caught before cargo runs.
    { cat "$repo/.dockerignore"; echo 'migrations/'; } >"$dir/dockerignore.no-migrations"
    expect_failure "when .dockerignore excludes migrations/" "is excluded by" \
        env DOCKER_CONTEXT_DOCKERIGNORE="$dir/dockerignore.no-migrations" bash "$self"

    # The real Dockerfile passes (the first run checks every dependency: minutes).
    bash "$self" "$repo/Dockerfile"

    # Without migrations/ the manifest is fine, but `sqlx::migrate!` fails to compile: caught
    # by cargo check (seconds, now that the dependencies are checked).
    no_migrations=$(without migrations)
    expect_failure "without COPY migrations" "cargo check --release -p room-service fails" \
        bash "$self" "$no_migrations"

    echo "$name: self-test: OK"
}

case ${1:-} in
    -h | --help) usage ;;
    --self-test) self_test ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) check "${1:-${DOCKER_CONTEXT_DOCKERFILE:-$repo/Dockerfile}}" ;;
esac
