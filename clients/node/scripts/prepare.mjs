// prepare.mjs - the package's `prepare` script: makes sure its own dependencies are installed
// beside it.
//
// `npm install <path>` links the folder into the project instead of copying it, and Node resolves
// a linked package's imports from the folder's real path, where npm installs nothing: from a
// fresh clone `import 'nats'` would fail. npm runs `prepare` of a linked folder (and before
// packing one for `--install-links` and `npm pack`), so this installs the locked dependencies
// into the folder when they are missing, and does nothing otherwise (the usual case in the
// repository, where scripts/install-deps.sh ran `npm ci` already).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('..', import.meta.url));
const deps = ['nats', 'protobufjs', 'long', 'xxhash-wasm'];
if (!deps.every((d) => existsSync(new URL(`../node_modules/${d}/package.json`, import.meta.url)))) {
    const r = spawnSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: dir,
        stdio: 'inherit',
    });
    process.exit(r.status ?? 1);
}
