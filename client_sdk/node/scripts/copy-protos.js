#!/usr/bin/env node
// Copies the sidecar's API (proto/informer/v1/*.proto of the repository this
// package is built in) into the package's own proto/ directory, so that the
// package carries what its loader reads: `npm pack` puts proto/ in the
// tarball ("files" in package.json) and an installed copy never looks
// outside itself. Run by the `prepare` script (npm ci, npm pack). Plain
// JavaScript: it runs before the TypeScript is compiled.
//
// The source: $INFORMER_SIDECAR_PROTO_ROOT/proto/informer/v1 if set, else
// ../../proto/informer/v1 relative to the package. The imports of these
// files are protobuf's well-known types (google/protobuf/*.proto), which
// @grpc/proto-loader ships itself.
'use strict';
const fs = require('fs');
const path = require('path');

const pkg = path.resolve(__dirname, '..');
const root = process.env.INFORMER_SIDECAR_PROTO_ROOT || path.resolve(pkg, '..', '..');
const from = path.join(root, 'proto', 'informer', 'v1');
const to = path.join(pkg, 'proto', 'informer', 'v1');

if (!fs.existsSync(from)) {
  console.error(`copy-protos: ${from} not found; build the package in its repository ` +
    'checkout (client_sdk/node) or set INFORMER_SIDECAR_PROTO_ROOT to the directory ' +
    'holding proto/informer/v1');
  process.exit(1);
}
const files = fs.readdirSync(from).filter((f) => f.endsWith('.proto')).sort();
if (files.length === 0) {
  console.error(`copy-protos: no .proto files in ${from}`);
  process.exit(1);
}
fs.rmSync(path.join(pkg, 'proto'), { recursive: true, force: true });
fs.mkdirSync(to, { recursive: true });
for (const f of files) {
  const text = fs.readFileSync(path.join(from, f), 'utf8');
  for (const m of text.matchAll(/^import\s+"([^"]+)"/gm)) {
    // Only the well-known types proto-loader resolves by itself may be
    // imported from outside informer/v1.
    if (!m[1].startsWith('google/protobuf/') && !m[1].startsWith('informer/v1/')) {
      console.error(`copy-protos: ${f} imports ${m[1]}, which this script does not copy`);
      process.exit(1);
    }
  }
  fs.writeFileSync(path.join(to, f), text);
}
console.log(`copy-protos: ${files.join(', ')} -> proto/informer/v1`);
