#!/usr/bin/env node
// `pi-forge` for npm installs (`npx pi-forge`, `npm install -g pi-forge`): runs the binary of
// this platform's package (installed by npm as an optional dependency), or `PI_FORGE_BIN`.
// No install script: npm picks the platform package by its `os` and `cpu` fields.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const PACKAGES = {
	"linux-x64": "@pi-forge/cli-linux-x64",
	"linux-arm64": "@pi-forge/cli-linux-arm64",
	"darwin-arm64": "@pi-forge/cli-darwin-arm64",
	"darwin-x64": "@pi-forge/cli-darwin-x64",
	"win32-x64": "@pi-forge/cli-win32-x64",
};
const EXE = process.platform === "win32" ? "pi-forge.exe" : "pi-forge";

function binary() {
	if (process.env.PI_FORGE_BIN) return process.env.PI_FORGE_BIN;
	const platform = `${process.platform}-${process.arch}`;
	const pkg = PACKAGES[platform];
	if (!pkg) {
		throw new Error(`no pi-forge binary for ${platform}: pi-forge publishes none for this platform. Build pi-forge from source and set PI_FORGE_BIN to the binary.`);
	}
	try {
		const bin = join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), "bin", EXE);
		if (existsSync(bin)) return bin;
	} catch {
		// Not installed: said below.
	}
	throw new Error(
		`no pi-forge binary for ${platform}: the package ${pkg} is not installed (npm leaves it out with --omit=optional or on another os/cpu). Reinstall pi-forge without --omit=optional, or build pi-forge from source and set PI_FORGE_BIN to the binary.`,
	);
}

let bin;
try {
	bin = binary();
} catch (e) {
	console.error(`pi-forge: ${e.message}`);
	process.exit(1);
}
const run = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
if (run.error) {
	console.error(`pi-forge: cannot run ${bin}: ${run.error.message}`);
	process.exit(1);
}
if (run.signal) process.kill(process.pid, run.signal);
process.exit(run.status ?? 1);
