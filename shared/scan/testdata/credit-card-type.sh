#!/bin/sh
# Writes credit-card-type-VERSION.json beside this script: each brand's IIN
# patterns, printed gaps and lengths, as the npm package credit-card-type
# (MIT) publishes them. Needs npm and node. TestCardBrandRanges reads it.
set -eu
v=10.3.0
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
(cd "$d" && npm pack --silent "credit-card-type@$v" >/dev/null && tar xzf "credit-card-type-$v.tgz")
node -e '
const t = require(process.argv[1]);
const brands = Object.values(t).map(c => ({type: c.type, patterns: c.patterns, gaps: c.gaps, lengths: c.lengths}));
console.log(JSON.stringify({source: "npm credit-card-type@" + process.argv[2] + " dist/lib/card-types.js", brands}, null, 1));
' "$d/package/dist/lib/card-types.js" "$v" >"$here/credit-card-type-$v.json"
