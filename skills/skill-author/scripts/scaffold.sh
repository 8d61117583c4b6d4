#!/usr/bin/env bash
# scaffold.sh - create a new skill folder from a template.
# Usage: bash scaffold.sh NAME PARENT_DIR "DESCRIPTION"
# Creates PARENT_DIR/NAME/SKILL.md and PARENT_DIR/NAME/scripts/; never overwrites.
set -euo pipefail
if [ $# -ne 3 ]; then
	echo "usage: scaffold.sh NAME PARENT_DIR \"DESCRIPTION\"" >&2
	exit 2
fi
name=$1 parent=$2 desc=$3
if ! [[ $name =~ ^[a-z0-9]+(-[a-z0-9]+)*$ ]] || [ ${#name} -gt 64 ]; then
	echo "scaffold.sh: name '$name' must be lowercase letters, digits and single hyphens, at most 64 characters" >&2
	exit 2
fi
if [ -z "${desc// /}" ]; then
	echo "scaffold.sh: the description must not be empty" >&2
	exit 2
fi
if [ ${#desc} -gt 1024 ]; then
	echo "scaffold.sh: the description is over 1024 characters" >&2
	exit 2
fi
dir=$parent/$name
if [ -e "$dir" ]; then
	echo "scaffold.sh: $dir already exists; not overwriting" >&2
	exit 1
fi
mkdir -p "$dir/scripts"
# Quote the description for YAML: single quotes, doubled inside.
q=${desc//\'/\'\'}
cat >"$dir/SKILL.md" <<EOT
---
name: $name
description: '$q'
---
# $name

Steps for the model, in order. Call scripts with an explicit interpreter:

    bash {SKILL_DIR}/scripts/run.sh ARGS

How to read the output, and how to answer.
EOT
cat >"$dir/scripts/run.sh" <<'EOT'
#!/usr/bin/env bash
# run.sh - the deterministic part of the skill. Replace this body.
set -euo pipefail
echo "usage: run.sh ARGS" >&2
exit 2
EOT
echo "created $dir:"
(cd "$dir" && find . -type f | sort | sed 's|^\./|  |')
echo "next: write scripts/run.sh, edit SKILL.md, then: thinbot skills check $dir"
