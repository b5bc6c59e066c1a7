// pi-forge bridge for Pi 1.6: an adapter between a Pi session and the local pi-forge server.
//
// It collects Pi's facts, forwards hook calls to the server, applies what the server answers and
// writes the session entries the server asks for. Every rule (compile, regex, tool policy, which
// Preset is active after a restore, profile preflight) lives in the Rust server; nothing here
// decides them. Protocol: docs/api.md "Live Pi host". Nothing starts in the factory (Pi runs
// factories for `--help` too): the server is found or started on `session_start` or `/forge`.

import { spawn } from "node:child_process";
import { existsSync, openSync, readFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { createRequire } from "node:module";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { getPackageDir, VERSION } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import type {
	BuildSystemPromptOptions,
	ExtensionAPI,
	ExtensionCommandContext,
	ExtensionContext,
} from "@earendil-works/pi-coding-agent";

const PROTOCOL = 1;
/** A Preset turn that gets no answer within this time is aborted (fail closed). */
const TURN_TIMEOUT_MS = 2000;
const START_TIMEOUT_MS = 15000;
/** Captured requests waiting to be forwarded; when full, the oldest is dropped and counted. */
const CAPTURE_QUEUE_LIMIT = 16;
const HERE = dirname(fileURLToPath(import.meta.url));

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };
interface Install {
	version: string;
	bin?: string;
}
interface Conn {
	base: string;
	token: string;
	url: string;
	hostId: string;
	sessionId: string;
	stream: AbortController;
}

function readJson(path: string): Obj | undefined {
	try {
		const value = JSON.parse(readFileSync(path, "utf8")) as Json;
		return value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
	} catch {
		return undefined;
	}
}

/**
 * What `pi-forge pi install` recorded (`install.json`: version and binary path), else the
 * version of the package this file ships in: the folder's own `package.json` (the layout `pi
 * install` writes) or the npm package `pi-forge` one level up (`extension/index.ts`).
 */
function install(): Install {
	const recorded = readJson(join(HERE, "install.json"));
	if (recorded && typeof recorded.version === "string") {
		return { version: recorded.version, bin: typeof recorded.bin === "string" ? recorded.bin : undefined };
	}
	for (const manifest of [join(HERE, "package.json"), join(HERE, "..", "package.json")]) {
		const pkg = readJson(manifest);
		if (pkg && typeof pkg.version === "string" && pkg.pi) return { version: pkg.version };
	}
	return { version: "unknown" };
}

/** The npm package holding the binary for each platform `pi-forge` publishes one for. */
const PLATFORM_PACKAGES: Record<string, string> = {
	"linux-x64": "@pi-forge/cli-linux-x64",
	"linux-arm64": "@pi-forge/cli-linux-arm64",
	"darwin-arm64": "@pi-forge/cli-darwin-arm64",
	"darwin-x64": "@pi-forge/cli-darwin-x64",
	"win32-x64": "@pi-forge/cli-win32-x64",
};
const EXE = process.platform === "win32" ? "pi-forge.exe" : "pi-forge";

/** Where the binary is, and how it was found; or why there is none. */
type Located = { bin: string; how: string } | { missing: string };

/**
 * `PI_FORGE_BIN`, else the platform package beside this extension (the npm install), else the
 * binary `pi-forge pi install` recorded, else `pi-forge` on PATH.
 */
function locate(): Located {
	const fromEnv = process.env.PI_FORGE_BIN;
	if (fromEnv) return { bin: fromEnv, how: "PI_FORGE_BIN" };
	const platform = `${process.platform}-${process.arch}`;
	const pkg = PLATFORM_PACKAGES[platform];
	if (pkg) {
		try {
			const manifest = createRequire(import.meta.url).resolve(`${pkg}/package.json`);
			const bin = join(dirname(manifest), "bin", EXE);
			if (existsSync(bin)) return { bin, how: `npm package ${pkg}` };
		} catch {
			// Not installed beside this extension: the other places follow.
		}
	}
	const recorded = install().bin;
	if (recorded && existsSync(recorded)) return { bin: recorded, how: "recorded by pi-forge pi install" };
	for (const dir of (process.env.PATH ?? "").split(delimiter)) {
		const bin = dir ? join(dir, EXE) : "";
		if (bin && existsSync(bin)) return { bin, how: "PATH" };
	}
	// From the npm package (its manifest lists the platform packages), say which one is missing.
	const npm = readJson(join(HERE, "..", "package.json"));
	if (npm?.optionalDependencies && typeof npm.optionalDependencies === "object") {
		if (!pkg) {
			return {
				missing: `no pi-forge binary for ${platform}: pi-forge publishes none for this platform. Build pi-forge from source and set PI_FORGE_BIN to the binary.`,
			};
		}
		return {
			missing: `no pi-forge binary for ${platform}: the package ${pkg} is not installed (npm leaves it out with --omit=optional or on another os/cpu). Reinstall with \`pi install npm:pi-forge\`, or build pi-forge from source and set PI_FORGE_BIN to the binary.`,
		};
	}
	return { missing: "cannot find the pi-forge binary. Install pi-forge (`pi install npm:pi-forge`) or put it on PATH, or set PI_FORGE_BIN to its path." };
}

/** The binary to run, or an error saying what is missing. */
function binary(): string {
	const found = locate();
	if ("missing" in found) throw new Error(found.missing);
	return found.bin;
}

function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
}

/** `text` ending as a sentence does. */
function sentence(text: string): string {
	return /[.!?]$/.test(text) ? text : `${text}.`;
}

/** Runs `pi-forge ui --no-open ...` detached and reads the editor URL from its first line. */
function startServer(cwd: string, args: string[]): Promise<string> {
	const bin = binary();
	const log = join(tmpdir(), `pi-forge-ui-${process.getuid?.() ?? "user"}.log`);
	return new Promise((resolve, reject) => {
		let out = "";
		let done = false;
		const child = spawn(bin, ["ui", ...args, "--no-open", "--project", cwd], {
			cwd,
			detached: true,
			stdio: ["ignore", "pipe", openSync(log, "a")],
		});
		const finish = (error?: string, url?: string) => {
			if (done) return;
			done = true;
			clearTimeout(timer);
			child.stdout?.removeAllListeners();
			child.stdout?.destroy();
			child.unref();
			if (error) reject(new Error(error));
			else resolve(url ?? "");
		};
		const timer = setTimeout(() => finish(`${bin} ui did not print its URL within ${START_TIMEOUT_MS / 1000} s (log: ${log})`), START_TIMEOUT_MS);
		child.on("error", (e) =>
			finish(
				`cannot run ${bin} (${errorText(e)}). Install pi-forge and put it on PATH, or set PI_FORGE_BIN to its path.`,
			),
		);
		child.on("exit", (code) => {
			if (!out.includes("\n")) finish(`${bin} ui exited with status ${code} before printing its URL (log: ${log})`);
		});
		child.stdout?.on("data", (chunk: Buffer) => {
			out += chunk.toString("utf8");
			const line = out.split("\n")[0];
			if (out.includes("\n")) finish(undefined, line.trim());
		});
	});
}

// sse:begin (pure: e2e/tests/pi_extension_sse.rs runs this part on its own under Node 22)
/** One server-sent event: its `event:` name ("message" when none) and its data lines. */
export interface SseEvent {
	event: string;
	data: string;
}

/**
 * Takes the complete events off the front of `text` (what the stream sent so far) by the
 * EventSource rules: a line ends at CRLF, LF or CR; a blank line ends an event; one space after
 * a field's colon is dropped, nothing else; data lines are joined with "\n"; comment lines
 * (`:`), unknown fields and events without data are skipped. Returns the rest, an event not yet
 * complete, to be passed again with the next chunk.
 */
export function readSse(text: string): { events: SseEvent[]; rest: string } {
	const events: SseEvent[] = [];
	let event = "";
	let data: string[] = [];
	let start = 0; // where the event being read began
	let at = 0; // where the next line begins
	for (;;) {
		const cr = text.indexOf("\r", at);
		const lf = text.indexOf("\n", at);
		const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
		// A CR at the very end may be the first half of a CRLF: wait for the next chunk.
		if (end < 0 || (end === cr && end === text.length - 1)) break;
		const line = text.slice(at, end);
		at = end + (text.startsWith("\r\n", end) ? 2 : 1);
		if (line === "") {
			if (data.length > 0) events.push({ event: event || "message", data: data.join("\n") });
			event = "";
			data = [];
			start = at;
			continue;
		}
		const colon = line.indexOf(":");
		if (colon === 0) continue;
		const field = colon < 0 ? line : line.slice(0, colon);
		let value = colon < 0 ? "" : line.slice(colon + 1);
		if (value.startsWith(" ")) value = value.slice(1);
		if (field === "event") event = value;
		else if (field === "data") data.push(value);
	}
	return { events, rest: text.slice(start) };
}
// sse:end

export default function piForge(pi: ExtensionAPI) {
	let conn: Conn | undefined;
	let ctxNow: ExtensionContext | undefined;
	let shuttingDown = false;
	// Mirrors of what the server decided, so the adapter can fail closed when it is unreachable.
	let activeStackId: string | null = null;
	let allowedTools: string[] | null = null;
	let finalizeRules = 0;
	// The Preset compiled for the prompt in flight (by `/turn`): every provider request of that
	// prompt must carry its compiled messages, or none is sent. `promptRequest` counts them.
	let promptStack: string | null = null;
	let promptRequest = 0;
	// Why the last connect failed, named when a turn is refused for want of a server.
	let connectError: string | undefined;
	let lastOptions: BuildSystemPromptOptions | undefined;
	let basePrompt: string | undefined;
	let idleWaiters: Array<() => void> = [];
	let stackIds: string[] = [];
	let profileIds: string[] = [];
	// Capabilities, mirrored from the server: whether requests need the projected text, and the
	// tools the guard blocks with the reason the model is told.
	let capabilityText = false;
	// Subagent approval dialogs: shown one at a time, each dismissable when the editor decides.
	let dialogs: Promise<void> = Promise.resolve();
	const planDialogs = new Map<string, AbortController>();
	let blockedTools: Record<string, string> = {};
	// Payload capture: a bounded queue drained in order, so usage follows its request.
	let captureOn = true;
	let requestSeq = 0;
	let piTurn = 0;
	let dropped = 0;
	let draining = false;
	const captureQueue: Array<{ c: Conn; kind: "payload" | "usage"; head: Obj; payload?: string }> = [];

	const headers = (c: Conn) => ({ "content-type": "application/json", "x-pi-forge-token": c.token });

	async function call(c: Conn, method: string, path: string, body?: unknown, timeoutMs = 10000): Promise<Obj> {
		const response = await fetch(`${c.base}${path}`, {
			method,
			headers: headers(c),
			body: body === undefined ? undefined : JSON.stringify(body),
			signal: AbortSignal.timeout(timeoutMs),
		});
		const text = await response.text();
		const value = (text ? JSON.parse(text) : {}) as Obj;
		if (!response.ok) {
			const message = typeof value.error === "string" ? value.error : `HTTP ${response.status}`;
			throw new Error(message);
		}
		return value;
	}

	function facts(ctx: ExtensionContext): Obj {
		const o = lastOptions;
		const model = ctx.model;
		return {
			tools: pi.getAllTools().map((t) => ({
				name: t.name,
				description: t.description ?? null,
				promptGuidelines: t.promptGuidelines ?? [],
				exposure: t.exposure ?? null,
				sourceInfo: { path: t.sourceInfo.path, source: t.sourceInfo.source, scope: t.sourceInfo.scope, origin: t.sourceInfo.origin },
			})),
			activeTools: pi.getActiveTools(),
			systemPrompt: basePrompt ?? null,
			promptOptions: o
				? {
						toolSnippets: o.toolSnippets ?? {},
						toolGuidelines: o.toolGuidelines ?? {},
						promptGuidelines: o.promptGuidelines ?? [],
						appendSystemPrompt: o.appendSystemPrompt ?? null,
						contextFiles: (o.contextFiles ?? []).map((f) => ({ path: f.path, content: f.content })),
						skills: (o.skills ?? []).map((s) => ({
							name: s.name,
							description: s.description,
							filePath: s.filePath,
							disableModelInvocation: s.disableModelInvocation,
						})),
					}
				: null,
			model: model
				? {
						provider: model.provider,
						id: model.id,
						api: model.api,
						name: model.name,
						reasoning: model.reasoning,
						midConvoSystem: (model.compat as { supportsMidConvoSystemMessages?: boolean } | undefined)?.supportsMidConvoSystemMessages === true,
					}
				: null,
			thinkingLevel: pi.getThinkingLevel(),
			models: ctx.modelRegistry.getAvailable().map((m) => ({ provider: m.provider, id: m.id, api: m.api, name: m.name, reasoning: m.reasoning })),
			piDocsRoot: getPackageDir(),
			leafId: ctx.sessionManager.getLeafId(),
		};
	}

	function forgeEntries(ctx: ExtensionContext): Obj[] {
		const entries: Obj[] = [];
		for (const e of ctx.sessionManager.getBranch()) {
			if (e.type === "custom" && e.customType.startsWith("pi-forge-")) {
				entries.push({ customType: e.customType, data: (e.data ?? null) as Json });
			}
		}
		return entries;
	}

	function status(ctx: ExtensionContext) {
		if (!ctx.hasUI) return;
		const text = conn ? `forge: ${activeStackId ?? "no Preset"}` : activeStackId ? "forge: disconnected" : undefined;
		ctx.ui.setStatus("pi-forge", text);
	}

	function applyEntries(entries: Json | undefined) {
		if (!Array.isArray(entries)) return;
		for (const e of entries) {
			if (e && typeof e === "object" && !Array.isArray(e) && typeof e.customType === "string") {
				pi.appendEntry(e.customType, e.data ?? null);
			}
		}
	}

	/** Takes the server's capability mirror (`capabilities`, `blockedTools`, `tools`) from an answer or command. */
	function mirrorCapabilities(o: Obj) {
		if (typeof o.capabilities === "boolean") capabilityText = o.capabilities;
		const blocked = o.blockedTools;
		if (blocked && typeof blocked === "object" && !Array.isArray(blocked)) {
			blockedTools = {};
			for (const [name, reason] of Object.entries(blocked)) blockedTools[name] = String(reason);
		}
	}

	function setTools(tools: Json | undefined) {
		if (Array.isArray(tools)) pi.setActiveTools(tools.filter((t): t is string => typeof t === "string"));
	}

	function waitIdle(ctx: ExtensionContext): Promise<void> {
		if (ctx.isIdle()) return Promise.resolve();
		return new Promise((resolve) => idleWaiters.push(resolve));
	}

	async function runCommand(ctx: ExtensionContext, command: Obj): Promise<Obj> {
		switch (command.kind) {
			case "setStack": {
				applyEntries(command.entries);
				mirrorCapabilities(command);
				activeStackId = typeof command.activeStackId === "string" ? command.activeStackId : null;
				if (!activeStackId) allowedTools = null;
				setTools(command.tools);
				status(ctx);
				return { ok: true, activeTools: pi.getActiveTools() };
			}
			case "applyProfile": {
				await waitIdle(ctx);
				const want = command.model as Obj;
				const provider = String(want.provider);
				const id = String(want.id);
				if (ctx.model?.provider !== provider || ctx.model?.id !== id) {
					const model = ctx.modelRegistry.find(provider, id);
					if (!model) return { ok: false, error: `Pi does not know the model ${provider}/${id}.` };
					if (!(await pi.setModel(model))) return { ok: false, error: `Pi has no credentials for ${provider}/${id}.` };
				}
				pi.setThinkingLevel(command.thinkingLevel as Parameters<typeof pi.setThinkingLevel>[0]);
				setTools(command.tools);
				applyEntries(command.entries);
				mirrorCapabilities(command);
				activeStackId = typeof command.activeStackId === "string" ? command.activeStackId : null;
				if (!activeStackId) allowedTools = null;
				status(ctx);
				return {
					ok: true,
					model: { provider, id },
					thinkingLevel: pi.getThinkingLevel(),
					activeTools: pi.getActiveTools(),
				};
			}
			case "appendEntries":
				applyEntries(command.entries);
				return { ok: true };
			case "capabilities":
				// Entries first (tools entry, then events), then the tools: the B8 commit order.
				applyEntries(command.entries);
				setTools(command.tools);
				if (allowedTools && Array.isArray(command.tools)) allowedTools = pi.getActiveTools();
				mirrorCapabilities(command);
				return { ok: true, activeTools: pi.getActiveTools() };
			case "approvePlan": {
				// Subagent approval in Pi: one dialog at a time; the editor may decide first.
				if (!ctx.hasUI) return { ok: true, shown: false };
				const runId = String(command.runId);
				const abort = new AbortController();
				planDialogs.set(runId, abort);
				dialogs = dialogs.then(() => reviewPlan(ctx, command, abort.signal)).catch(() => undefined);
				return { ok: true, shown: true };
			}
			case "subagentDone":
				// A background run ended: its result reaches the model as a message (and a turn).
				pi.sendMessage(
					{
						customType: "pi-forge-subagent-result",
						content: String(command.message),
						display: true,
						details: { runId: String(command.runId), ok: command.ok === true },
					},
					{ triggerTurn: true, deliverAs: "followUp" },
				);
				return { ok: true };
			case "dismissPlan":
				planDialogs.get(String(command.runId))?.abort();
				planDialogs.delete(String(command.runId));
				return { ok: true };
			case "notify":
				if (ctx.hasUI) ctx.ui.notify(String(command.message), command.level === "error" ? "error" : "info");
				return { ok: true };
			default:
				return { ok: false, error: `unknown command ${String(command.kind)}; update the extension with \`pi-forge pi install\`` };
		}
	}

	/**
	 * The review of a subagent plan: reject, view the full prompt (read-only), or approve. Pi's
	 * selector starts on the first option, so Reject comes first: Enter alone never approves.
	 */
	async function reviewPlan(ctx: ExtensionContext, command: Obj, signal: AbortSignal) {
		const runId = String(command.runId);
		let viewed = false;
		for (;;) {
			if (signal.aborted) return;
			const choice = await ctx.ui.select(String(command.review), ["Reject", "View full prompt", "Approve and run"], { signal });
			if (signal.aborted) return;
			if (choice === "View full prompt") {
				viewed = true;
				await ctx.ui.editor("Full prompt (read-only: edits are ignored)", String(command.fullPrompt));
				continue;
			}
			const c = conn;
			if (!c) return;
			const approve = choice === "Approve and run";
			const path = `/api/agent/plans/${encodeURIComponent(runId)}/${approve ? "approve" : "reject"}`;
			const body = approve ? { executionFingerprint: command.executionFingerprint, viewedFullPrompt: viewed, from: "pi" } : {};
			await call(c, "POST", path, body).catch((e) => ctx.ui.notify(`pi-forge: ${errorText(e)}`, "error"));
			planDialogs.delete(runId);
			return;
		}
	}

	/** Reads the command stream until it ends; its end means the server is gone. */
	async function listen(c: Conn, ready: () => void) {
		try {
			const response = await fetch(`${c.base}/api/host/${c.hostId}/commands`, { headers: headers(c), signal: c.stream.signal });
			if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
			const decoder = new TextDecoder();
			let buffer = "";
			for await (const chunk of response.body) {
				const read = readSse(buffer + decoder.decode(chunk as Uint8Array, { stream: true }));
				buffer = read.rest;
				for (const { event, data } of read.events) {
					if (event === "ready") ready();
					if (event === "command" && ctxNow) {
						const command = JSON.parse(data) as Obj;
						const ctx = ctxNow;
						void runCommand(ctx, command)
							.catch((e) => ({ ok: false, error: errorText(e) }) as Obj)
							.then((result) =>
								call(c, "POST", `/api/host/${c.hostId}/commands/${String(command.id)}/result`, { sessionId: c.sessionId, result }),
							)
							.catch(() => undefined);
					}
				}
			}
		} catch {
			// Closed by us, or the server went away: either way this connection is over.
		} finally {
			ready();
			if (conn === c) {
				conn = undefined;
				if (ctxNow && !shuttingDown) status(ctxNow);
			}
		}
	}

	/** Finds or starts the project's server, says hello and opens the command stream. */
	async function connect(ctx: ExtensionContext, takeover = false, serverArgs: string[] = []): Promise<Conn> {
		if (conn && !takeover && serverArgs.length === 0) return conn;
		conn?.stream.abort();
		conn = undefined;
		try {
			const c = await open(ctx, takeover, serverArgs);
			connectError = undefined;
			return c;
		} catch (e) {
			connectError = errorText(e);
			throw e;
		}
	}

	async function open(ctx: ExtensionContext, takeover: boolean, serverArgs: string[]): Promise<Conn> {
		const url = await startServer(ctx.cwd, ctx.isProjectTrusted() ? serverArgs : [...serverArgs, "--untrusted"]);
		const parsed = new URL(url);
		const token = parsed.searchParams.get("token") ?? "";
		const sessionId = ctx.sessionManager.getSessionId();
		const probe: Conn = { base: parsed.origin, token, url, hostId: "", sessionId, stream: new AbortController() };
		const welcome = await call(probe, "POST", "/api/host/hello", {
			protocol: PROTOCOL,
			extensionVersion: install().version,
			piVersion: VERSION,
			mode: ctx.mode,
			hasUI: ctx.hasUI,
			cwd: ctx.cwd,
			sessionId,
			sessionFile: ctx.sessionManager.getSessionFile() ?? null,
			projectTrusted: ctx.isProjectTrusted(),
			facts: facts(ctx),
			entries: forgeEntries(ctx),
			takeover,
		});
		const c: Conn = { ...probe, hostId: String(welcome.hostId) };
		applyEntries(welcome.entries);
		mirrorCapabilities(welcome);
		setTools(welcome.tools);
		activeStackId = typeof welcome.activeStackId === "string" ? welcome.activeStackId : null;
		if (welcome.versionMismatch === true && ctx.hasUI) {
			ctx.ui.notify(
				`pi-forge: the extension (${install().version}) and the server (${String(welcome.serverVersion)}) differ. Update both from one place: \`pi update npm:pi-forge\` for the npm package, \`pi-forge pi install\` for a binary built from source.`,
				"warning",
			);
		}
		conn = c;
		await new Promise<void>((ready) => void listen(c, ready));
		status(ctx);
		return c;
	}

	/**
	 * The Preset the branch's newest stack-state entry names, if any ("none" names none): only
	 * used to refuse turns while no server can say what the branch means.
	 */
	function recordedStack(ctx: ExtensionContext): string | null {
		const entries = forgeEntries(ctx).filter((e) => e.customType === "pi-forge-prompt-stack-state");
		const data = entries[entries.length - 1]?.data;
		const id = data && typeof data === "object" && !Array.isArray(data) ? data.activeStackId : undefined;
		if (entries.length === 0) return null;
		return typeof id === "string" && id !== "none" ? id : typeof id === "string" ? null : "(unreadable entry)";
	}

	function hasForgeState(ctx: ExtensionContext): boolean {
		const global = process.env.PI_FORGE_GLOBAL_DIR || join(homedir(), ".pi", "forge");
		return existsSync(join(ctx.cwd, ".pi", "forge")) || existsSync(global) || forgeEntries(ctx).length > 0;
	}

	async function postFacts(ctx: ExtensionContext) {
		const c = conn;
		if (!c) return;
		await call(c, "POST", `/api/host/${c.hostId}/facts`, { sessionId: c.sessionId, facts: facts(ctx) }, TURN_TIMEOUT_MS).catch(() => undefined);
	}

	function fail(ctx: ExtensionContext, message: string) {
		if (ctx.hasUI) ctx.ui.notify(message, "error");
		ctx.abort();
	}

	// ---- lifecycle ----

	pi.on("session_start", async (_event, ctx) => {
		ctxNow = ctx;
		shuttingDown = false;
		basePrompt = ctx.getSystemPrompt();
		requestSeq = 0;
		dropped = 0;
		if (!hasForgeState(ctx)) return;
		await connect(ctx).catch((e) => {
			// The server decides what the branch means; without one, a Preset the branch
			// recorded still has to stop every turn (fail closed), so it is mirrored here.
			activeStackId = recordedStack(ctx);
			const then = activeStackId ? ` Preset ${activeStackId} is recorded in this session, so prompts are refused until it connects (/forge ui).` : "";
			if (ctx.hasUI) ctx.ui.notify(`pi-forge: could not connect to the editor server: ${sentence(errorText(e))}${then}`, activeStackId ? "error" : "warning");
			status(ctx);
		});
	});

	pi.on("session_tree", async (_event, ctx) => {
		ctxNow = ctx;
		if (conn) await connect(ctx, true).catch(() => undefined);
	});

	pi.on("session_shutdown", async () => {
		shuttingDown = true;
		const c = conn;
		conn = undefined;
		if (!c) return;
		await call(c, "POST", `/api/host/${c.hostId}/bye`, { sessionId: c.sessionId }, 1000).catch(() => undefined);
		c.stream.abort();
	});

	// Facts that change during a session: model, thinking level, compaction, tool drift.
	const refresh = async (_event: unknown, ctx: ExtensionContext) => {
		ctxNow = ctx;
		await postFacts(ctx);
	};
	pi.on("model_select", refresh);
	pi.on("thinking_level_select", refresh);
	pi.on("session_compact", refresh);
	pi.on("turn_start", refresh);

	pi.on("agent_settled", async () => {
		const waiters = idleWaiters;
		idleWaiters = [];
		for (const resolve of waiters) resolve();
		// Idle: the server may ask for a delivery anchor (a cursor entry, never a message).
		const c = conn;
		if (!c) return;
		const answer = await call(c, "POST", `/api/host/${c.hostId}/settled`, { sessionId: c.sessionId }, TURN_TIMEOUT_MS).catch(() => ({}) as Obj);
		applyEntries(answer.entries);
	});

	// ---- the per-turn prompt path ----

	/**
	 * The connection a new prompt needs: with a Preset or capability active and no server, one
	 * attempt to reach (or start) it again, the same rule as every /forge and /capability
	 * command. `refused` says why the prompt cannot run.
	 */
	async function promptConnection(ctx: ExtensionContext): Promise<{ c?: Conn; refused?: string }> {
		if (conn || !(activeStackId || capabilityText)) return { c: conn };
		const c = await connect(ctx).catch(() => undefined);
		if (c) return { c };
		const why = sentence(connectError ?? "The connection was lost");
		const what = activeStackId ? `Preset ${activeStackId} is active` : "capabilities are active";
		return { refused: `pi-forge: ${what} but the pi-forge server is not reachable, so nothing was sent. ${why}` };
	}

	/** `POST /turn`: the server compiles the session's Preset for `prompt` now. */
	function turnRequest(c: Conn, ctx: ExtensionContext, prompt: string): Promise<Obj> {
		const now = new Date();
		return call(
			c,
			"POST",
			`/api/host/${c.hostId}/turn`,
			{ sessionId: c.sessionId, prompt, clock: { epochMs: now.getTime(), utcOffsetMinutes: -now.getTimezoneOffset() }, facts: facts(ctx) },
			TURN_TIMEOUT_MS,
		);
	}

	const notCompiled = (e: unknown) => `pi-forge: the server did not compile Preset ${activeStackId} (${errorText(e)}), so nothing was sent.`;

	/**
	 * Why a new prompt must be refused before it starts, if it must: no server for an active
	 * Preset or capability (`promptConnection`), or the active Preset does not compile. Asked
	 * when the input arrives, so a refused prompt never enters Pi's conversation (an aborted run
	 * would keep it, and it would reach the model with the next prompt).
	 */
	async function refusal(ctx: ExtensionContext, prompt: string): Promise<string | undefined> {
		const { c, refused } = await promptConnection(ctx);
		if (refused || !c || !activeStackId) return refused;
		try {
			const answer = await turnRequest(c, ctx, prompt);
			if (answer.active === true && typeof answer.abort === "string") return answer.abort;
		} catch (e) {
			return notCompiled(e);
		}
		return undefined;
	}

	pi.on("input", async (event, ctx) => {
		// A message queued into a running prompt joins a prompt that was already checked.
		if (event.streamingBehavior) return { action: "continue" };
		ctxNow = ctx;
		const refused = await refusal(ctx, event.text);
		if (!refused) return { action: "continue" };
		if (ctx.hasUI) ctx.ui.notify(refused, "error");
		return { action: "handled" };
	});

	pi.on("before_agent_start", async (event, ctx) => {
		ctxNow = ctx;
		lastOptions = event.systemPromptOptions;
		basePrompt = event.systemPrompt;
		promptStack = null;
		promptRequest = 0;
		// Checked at input already; a server lost since then gets the same one attempt.
		const { c, refused } = await promptConnection(ctx);
		if (refused) return fail(ctx, refused);
		if (!c) return;
		let answer: Obj;
		try {
			answer = await turnRequest(c, ctx, event.messageType === "user" ? event.prompt : "");
		} catch (e) {
			if (activeStackId) fail(ctx, notCompiled(e));
			return;
		}
		mirrorCapabilities(answer);
		if (answer.active !== true) {
			activeStackId = null;
			allowedTools = null;
			finalizeRules = 0;
			setTools(answer.activeTools);
			return;
		}
		activeStackId = typeof answer.stackId === "string" ? answer.stackId : activeStackId;
		if (typeof answer.abort === "string") {
			fail(ctx, answer.abort);
			return;
		}
		allowedTools = Array.isArray(answer.activeTools) ? answer.activeTools.filter((t): t is string => typeof t === "string") : [];
		finalizeRules = typeof answer.finalizeRules === "number" ? answer.finalizeRules : 0;
		pi.setActiveTools(allowedTools);
		promptStack = activeStackId;
		return { systemPrompt: String(answer.systemPrompt) };
	});

	// Every provider request of a Preset prompt, the follow-ups after tool results included, is
	// compiled from Pi's own (request-only) context; without an answer the request is not sent.
	pi.on("context", async (event, ctx) => {
		const stack = promptStack;
		if (!stack) return;
		promptRequest += 1;
		const n = promptRequest;
		const c = conn;
		if (!c) {
			promptStack = null;
			return fail(ctx, `pi-forge: request ${n} of Preset ${stack} was not sent: the connection to the pi-forge server was lost.`);
		}
		try {
			const answer = await call(c, "POST", `/api/host/${c.hostId}/context`, { sessionId: c.sessionId, request: n, messages: event.messages }, TURN_TIMEOUT_MS);
			if (typeof answer.abort === "string") return fail(ctx, answer.abort);
			if (answer.stackId === stack && Array.isArray(answer.messages)) return { messages: answer.messages as unknown as typeof event.messages };
			// `{}` or another Preset: the system prompt this prompt carries is no longer the one
			// the server would compile, so the request is refused rather than sent mixed.
			promptStack = null;
			return fail(ctx, `pi-forge: request ${n} of Preset ${stack} was not sent: the session's Preset changed during this prompt; send the prompt again.`);
		} catch (e) {
			promptStack = null;
			fail(ctx, `pi-forge: request ${n} of Preset ${stack} was not sent: the server did not answer (${errorText(e)}).`);
		}
	});

	// Capability text reaches the model in every request while a capability with text is active:
	// the server says what to insert where (request-only, never written to the transcript).
	pi.on("context_with_system", async (event, ctx) => {
		const c = conn;
		if (!capabilityText) return;
		// The prompt started connected (see before_agent_start); a server lost since then is not
		// replaced mid-prompt.
		if (!c) return fail(ctx, "pi-forge: the connection to the pi-forge server was lost during this prompt, so the request with the active capabilities was not sent. Send the prompt again: it starts the editor again.");
		try {
			const roles = event.messages.map((m) => String((m as { role?: unknown }).role ?? ""));
			const answer = await call(c, "POST", `/api/host/${c.hostId}/system-context`, { sessionId: c.sessionId, roles }, TURN_TIMEOUT_MS);
			if (typeof answer.index !== "number" || !answer.message) return;
			const messages = [...event.messages];
			messages.splice(answer.index, 0, answer.message as unknown as (typeof messages)[number]);
			return { messages };
		} catch (e) {
			fail(ctx, `pi-forge: the server did not deliver the active capabilities (${errorText(e)}), so nothing was sent.`);
		}
	});

	pi.on("message_end", async (event) => {
		captureUsage(event.message);
		const c = conn;
		if (!c || finalizeRules === 0) return;
		try {
			const answer = await call(c, "POST", `/api/host/${c.hostId}/finalize`, { sessionId: c.sessionId, message: event.message }, TURN_TIMEOUT_MS);
			if (answer.message) return { message: answer.message as unknown as typeof event.message };
		} catch {
			// Finalize only rewrites text already received; the message stays as the model wrote it.
		}
	});

	pi.on("tool_call", (event) => {
		const blocked = blockedTools[event.toolName];
		if (blocked) return { block: true, reason: blocked };
		if (allowedTools && !allowedTools.includes(event.toolName)) {
			return { block: true, reason: `pi-forge: the active Preset ${activeStackId ?? ""} does not allow the tool ${event.toolName}.` };
		}
	});

	// ---- payload capture (observe only: the handler never returns a value or waits) ----

	function enqueue(item: (typeof captureQueue)[number]) {
		if (captureQueue.length >= CAPTURE_QUEUE_LIMIT) {
			captureQueue.shift();
			dropped += 1;
		}
		captureQueue.push(item);
		if (!draining) void drain();
	}

	async function drain() {
		draining = true;
		while (captureQueue.length > 0) {
			const item = captureQueue.shift();
			if (!item) break;
			const head = item.kind === "payload" ? JSON.stringify({ ...item.head, dropped }) : JSON.stringify(item.head);
			const body = item.payload === undefined ? head : `${head.slice(0, -1)},"payload":${item.payload}}`;
			try {
				const response = await fetch(`${item.c.base}/api/host/${item.c.hostId}/${item.kind}`, {
					method: "POST",
					headers: headers(item.c),
					body,
					signal: AbortSignal.timeout(10000),
				});
				const text = await response.text();
				// A capture the server refused (too large, say) is lost like a dropped one: count it.
				if (item.kind === "payload" && !response.ok) dropped += 1;
				if (item.kind === "payload" && response.ok && ctxNow?.hasUI) {
					const answer = JSON.parse(text) as Obj;
					if (answer.armed === "pi") {
						const saved = typeof answer.saved === "string" ? ` · saved to ${answer.saved}` : "";
						const failed = typeof answer.saveError === "string" ? ` · not saved: ${answer.saveError}` : "";
						ctxNow.ui.notify(
							`pi-forge: captured ${String(answer.turnId)} (${String(answer.bytes)} bytes, ~${String(answer.approxTokens)} tokens)${saved}${failed} · ${item.c.base}/`,
							failed ? "warning" : "info",
						);
					}
				}
			} catch {
				// The server is gone or busy: the capture is lost, the request itself was never touched.
			}
		}
		draining = false;
	}

	pi.on("turn_start", (event) => {
		piTurn = event.turnIndex;
	});

	pi.on("before_provider_request", (event, ctx) => {
		const c = conn;
		if (!c || !captureOn) return undefined;
		requestSeq += 1;
		let payload: string | undefined;
		try {
			payload = JSON.stringify(event.payload);
		} catch {
			return undefined;
		}
		const model = ctx.model;
		enqueue({
			c,
			kind: "payload",
			head: {
				sessionId: c.sessionId,
				seq: requestSeq,
				piTurn,
				provider: model?.provider ?? null,
				model: model?.id ?? null,
				api: model?.api ?? null,
				capturedAt: new Date().toISOString(),
			},
			payload: payload ?? "null",
		});
		return undefined;
	});

	function captureUsage(message: unknown) {
		const c = conn;
		if (!c || !captureOn || requestSeq === 0 || !message || typeof message !== "object") return;
		const m = message as { role?: string; usage?: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number; cost?: { total?: number } }; provider?: string; model?: string; stopReason?: string };
		if (m.role !== "assistant" || !m.usage) return;
		enqueue({
			c,
			kind: "usage",
			head: {
				sessionId: c.sessionId,
				seq: requestSeq,
				provider: m.provider ?? null,
				model: m.model ?? null,
				input: m.usage.input ?? 0,
				output: m.usage.output ?? 0,
				cacheRead: m.usage.cacheRead ?? 0,
				cacheWrite: m.usage.cacheWrite ?? 0,
				cost: typeof m.usage.cost?.total === "number" ? m.usage.cost.total : null,
				stopReason: m.stopReason ?? null,
			},
		});
	}

	// ---- /forge ----

	async function refreshIds(c: Conn) {
		const stacks = await call(c, "GET", "/api/stacks").catch(() => ({}) as Obj);
		const profiles = await call(c, "GET", "/api/profiles").catch(() => ({}) as Obj);
		const ids = (list: Json | undefined) =>
			Array.isArray(list) ? list.map((s) => (s && typeof s === "object" && !Array.isArray(s) ? String(s.selector ?? s.id) : "")).filter(Boolean) : [];
		stackIds = ids(stacks.stacks);
		profileIds = ids(profiles.profiles);
	}

	async function forge(args: string, ctx: ExtensionCommandContext) {
		ctxNow = ctx;
		lastOptions = ctx.getSystemPromptOptions();
		const [sub = "ui", ...rest] = args.trim().split(/\s+/).filter(Boolean);
		const arg = rest.join(" ");
		const say = (text: string, level: "info" | "warning" | "error" = "info") => {
			if (ctx.hasUI) ctx.ui.notify(text, level);
			else console.error(text);
		};
		try {
			switch (sub) {
				case "ui": {
					if (arg === "stop") {
						conn?.stream.abort();
						conn = undefined;
						const bin = binary();
						await pi.exec(bin, ["ui", "stop", "--project", ctx.cwd]);
						status(ctx);
						return say("pi-forge: editor stopped");
					}
					const c = await connect(ctx, arg === "restart", arg === "restart" ? ["--restart"] : []);
					// The token stays out of notifications and command lines: `pi-forge ui open`
					// hands the browser a user-only launch page; `pi-forge ui` in a terminal prints
					// the sign-in address.
					const signIn = "run `pi-forge ui` in the project for the sign-in address";
					if (!ctx.hasUI) return say(`pi-forge editor: ${c.base}/ (${signIn})`);
					const opened = await pi.exec(binary(), ["ui", "open", "--project", ctx.cwd]).catch((e: unknown) => ({ code: 1, stderr: errorText(e) }));
					if (opened.code === 0) return say(`pi-forge editor: ${c.base}/ (opened in your browser)`);
					const why = String(opened.stderr).trim().split("\n").pop() ?? "";
					return say(`pi-forge editor: ${c.base}/ (could not open a browser${why ? `: ${why}` : ""}; ${signIn})`, "warning");
				}
				case "status": {
					const c = await connect(ctx);
					const live = await call(c, "GET", "/api/live");
					const status = await call(c, "GET", "/api/profiles/status").catch(() => ({}) as Obj);
					const last = status.lastApplied as Obj | null | undefined;
					const drift = last && typeof last === "object" && Array.isArray(last.drifted) ? last.drifted.join(", ") : "";
					const profile = last && typeof last === "object" ? String((last.provenance as Obj | undefined)?.profileId ?? "") : "";
					const found = locate();
					const where = "bin" in found ? ` · binary ${found.bin} (${found.how})` : "";
					return say(
						`pi-forge: server ${c.base} · Preset ${String(live.activeStackId ?? "none")} · profile ${profile || "none"}${drift ? ` (changed since: ${drift})` : ""} · extension ${install().version}, server ${String(live.serverVersion ?? "?")}${where}`,
					);
				}
				case "preset": {
					if (!arg) return say("usage: /forge preset <id>|off", "warning");
					const c = await connect(ctx);
					const off = arg === "off" || arg === "none";
					await call(c, "POST", off ? "/api/disable" : `/api/stacks/${encodeURIComponent(arg)}/activate`, {}, 35000);
					return say(off ? "pi-forge: no Preset active" : `pi-forge: Preset ${activeStackId ?? arg} active`);
				}
				case "profile": {
					if (!arg) return say("usage: /forge profile <id>", "warning");
					const c = await connect(ctx);
					const result = await call(c, "POST", `/api/profiles/${encodeURIComponent(arg)}/apply`, {}, 35000);
					const notes = Array.isArray(result.notes) ? result.notes.map(String) : [];
					const shown = (v: Json | undefined): string =>
						v && typeof v === "object" && !Array.isArray(v) ? `${String(v.provider)}/${String(v.id)}` : String(v ?? "none");
					const changed = Array.isArray(result.changed)
						? result.changed.map((c) => {
								const change = c as Obj;
								return `${String(change.field)}: ${shown(change.from)} → ${shown(change.to)}`;
							})
						: [];
					return say([`pi-forge: profile ${arg} applied`, ...changed, ...notes].join("\n"));
				}
				case "payload": {
					const [action = "status", option = ""] = rest;
					if (action === "off" || action === "on") {
						captureOn = action === "on";
						return say(captureOn ? "pi-forge: capturing provider requests" : "pi-forge: not capturing provider requests in this session");
					}
					const c = await connect(ctx);
					if (action === "next") {
						if (option && option !== "save") return say("usage: /forge payload next [save]", "warning");
						await call(c, "POST", "/api/payloads/arm", { save: option === "save", by: "pi" });
						return say(`pi-forge: the next provider request will be captured${option === "save" ? " and saved to .pi/forge/payloads/" : ""}`);
					}
					if (action === "clear") {
						await call(c, "DELETE", "/api/payloads");
						return say("pi-forge: captures cleared");
					}
					if (action !== "status") return say("usage: /forge payload next [save] | clear | on | off", "warning");
					const list = await call(c, "GET", "/api/payloads");
					const turns = Array.isArray(list.turns) ? list.turns.length : 0;
					return say(
						`pi-forge: ${turns} captured request(s)${list.armed ? " · next request armed" : ""}${captureOn ? "" : " · capture off"}${dropped ? ` · ${dropped} dropped` : ""} · ${c.base}/`,
					);
				}
				case "agent": {
					const [action = "", profileId = "", ...words] = rest;
					const task = words.join(" ");
					const c = await connect(ctx);
					if (action === "plan" || action === "run") {
						if (!profileId || !task) return say(`usage: /forge agent ${action} <profile> <task>`, "warning");
						if (action === "plan") {
							const answer = await call(c, "POST", "/api/agent/prepare", { profile: profileId, task });
							return say(`${String(answer.review)}\nNothing was sent.`);
						}
						say(`pi-forge: preparing a plan for ${profileId}; approve it here or in the editor (${c.base}/)`);
						const answer = await call(c, "POST", `/api/host/${c.hostId}/subagent`, { sessionId: c.sessionId, profile: profileId, task, background: false }, 4_200_000);
						return say(String(answer.text), answer.ok === true ? "info" : "warning");
					}
					if (action === "runs") {
						const list = await call(c, "GET", "/api/agent/runs");
						const runs = Array.isArray(list.runs) ? (list.runs as Obj[]) : [];
						if (runs.length === 0) return say("pi-forge: no delegated runs yet");
						return say(runs.map((r) => `${String(r.runId)}  ${String(r.status)}  ${String(r.profileId)}  ${String(r.model)}  ${r.durationMs == null ? `since ${String(r.startedAt)}` : `${String(r.durationMs)} ms`}`).join("\n"));
					}
					if (action === "cancel") {
						if (!profileId) return say("usage: /forge agent cancel <run-id>", "warning");
						const answer = await call(c, "POST", `/api/agent/runs/${encodeURIComponent(profileId)}/cancel`, {});
						return say(`pi-forge: cancelling ${String(answer.runId)} (it was ${String(answer.status)})`);
					}
					if (action === "result") {
						if (!profileId) return say("usage: /forge agent result <run-id>", "warning");
						const answer = await call(c, "GET", `/api/agent/runs/${encodeURIComponent(profileId)}`);
						return say(String(answer.answer ?? ""));
					}
					return say("usage: /forge agent plan|run <profile> <task> | runs | result <run-id> | cancel <run-id>", "warning");
				}
				default:
					return say("usage: /forge ui [stop|restart] | status | preset <id>|off | profile <id> | payload next [save]|clear|on|off | agent plan|run|runs|result|cancel", "warning");
			}
		} catch (e) {
			say(`pi-forge: ${errorText(e)}`, "error");
		}
	}

	pi.registerCommand("forge", {
		description: "pi-forge: open the editor (ui), show status, switch Preset, apply a profile, capture payloads",
		getArgumentCompletions: async (prefix: string) => {
			const words = prefix.split(/\s+/);
			if (words.length <= 1) {
				return ["ui", "status", "preset", "profile", "payload", "agent"].filter((s) => s.startsWith(words[0] ?? "")).map((s) => ({ value: s, label: s }));
			}
			if (conn) await refreshIds(conn);
			const [sub, partial = ""] = words;
			if (sub === "agent" && words.length === 2) {
				return ["plan", "run", "runs", "result", "cancel"].filter((s) => s.startsWith(partial)).map((s) => ({ value: `agent ${s}`, label: s }));
			}
			if (sub === "payload") {
				return ["next", "next save", "clear", "on", "off"].filter((s) => s.startsWith(words.slice(1).join(" "))).map((s) => ({ value: `payload ${s}`, label: s }));
			}
			const pool = sub === "ui" ? ["stop", "restart"] : sub === "preset" ? [...stackIds, "off"] : sub === "profile" ? profileIds : [];
			return pool.filter((s) => s.startsWith(partial)).map((s) => ({ value: `${sub} ${s}`, label: s }));
		},
		handler: forge,
	});

	// ---- /capability and forge_capability ----

	const CAPABILITY_SUBCOMMANDS = ["add", "enable", "enable-bound", "disable", "reset", "bindings", "status"];

	pi.registerCommand("capability", {
		description: "pi-forge capabilities: add <text> | enable <capability> | enable-bound <binding> | disable <id> | reset | bindings | status",
		getArgumentCompletions: async (prefix: string) => {
			const words = prefix.split(/\s+/);
			if (words.length <= 1) {
				return CAPABILITY_SUBCOMMANDS.filter((s) => s.startsWith(words[0] ?? "")).map((s) => ({ value: s, label: s }));
			}
			const c = conn;
			if (!c) return null;
			const [sub, partial = ""] = words;
			let pool: string[] = [];
			if (sub === "enable") {
				const list = await call(c, "GET", "/api/capabilities").catch(() => ({}) as Obj);
				pool = Array.isArray(list.capabilities) ? list.capabilities.map((e) => String((e as Obj).selector ?? "")) : [];
			} else if (sub === "enable-bound" || sub === "disable") {
				const list = await call(c, "GET", sub === "disable" ? "/api/capability-state" : "/api/capability-state/available").catch(() => ({}) as Obj);
				if (sub === "disable") {
					const active = (list.state as Obj | undefined)?.active;
					pool = Array.isArray(active) ? active.map((a) => String((a as Obj).activationId ?? "")) : [];
				} else {
					pool = Array.isArray(list.choices) ? list.choices.filter((x) => (x as Obj).kind === "binding").map((x) => String((x as Obj).id)) : [];
				}
			}
			return pool.filter((s) => s && s.startsWith(partial)).map((s) => ({ value: `${sub} ${s}`, label: s }));
		},
		handler: async (args: string, ctx: ExtensionCommandContext) => {
			ctxNow = ctx;
			const text = args.trim();
			const cut = text.search(/\s/);
			const command = cut < 0 ? text : text.slice(0, cut);
			const arg = cut < 0 ? "" : text.slice(cut + 1);
			const say = (message: string, level: "info" | "warning" | "error") => {
				if (ctx.hasUI) ctx.ui.notify(message, level);
				else console.error(message);
			};
			try {
				const c = await connect(ctx);
				const answer = await call(c, "POST", `/api/host/${c.hostId}/capability`, { sessionId: c.sessionId, command: command || "status", arg }, 35000);
				say(`pi-forge: ${String(answer.message ?? "")}`, answer.ok === true ? "info" : "warning");
			} catch (e) {
				say(`pi-forge: ${errorText(e)}`, "error");
			}
		},
	});

	// ---- subagent delegation (offered only where a Preset's tool policy allows these tools) ----

	pi.registerTool({
		name: "forge_subagent_profiles",
		label: "pi-forge subagent profiles",
		description:
			"List the agent profiles you may delegate a read-only task to with forge_subagent: id, model, thinking level, Preset and whether it is ready. Every run needs a person's approval of the exact prompt first.",
		promptSnippet: "List the agent profiles you may delegate a read-only task to",
		parameters: Type.Object({}, { additionalProperties: false }),
		defaultActive: false,
		async execute() {
			const c = conn;
			if (!c) return { content: [{ type: "text", text: "pi-forge is not connected." }], details: {}, isError: true };
			const answer = await call(c, "GET", "/api/agent/profiles");
			return { content: [{ type: "text", text: JSON.stringify(answer.profiles ?? []) }], details: {} };
		},
	});

	pi.registerTool({
		name: "forge_subagent",
		label: "pi-forge subagent",
		description:
			"Delegate a read-only task to an agent profile (see forge_subagent_profiles). It runs in a clean child Pi with only read-only tools after a person approved the exact prompt in the pi-forge editor; the answer comes back as the result. Several calls in one turn run in parallel.",
		promptSnippet: "Delegate a read-only task to an agent profile; runs only after a person approves the exact prompt",
		promptGuidelines: ["Call forge_subagent_profiles first to pick a ready profile for forge_subagent.", "Give forge_subagent a self-contained task: the child sees none of this conversation."],
		parameters: Type.Object(
			{
				profile: Type.String({ minLength: 1, maxLength: 200 }),
				task: Type.String({ minLength: 1 }),
				background: Type.Optional(Type.Boolean({ description: "Return at once; the result arrives as a message when the run ends." })),
			},
			{ additionalProperties: false },
		),
		defaultActive: false,
		async execute(_toolCallId, params) {
			const c = conn;
			if (!c) return { content: [{ type: "text", text: "pi-forge is not connected; nothing was delegated." }], details: { runId: null }, isError: true };
			// Waits for the person's decision (at most 10 minutes) and the child's run.
			const answer = await call(c, "POST", `/api/host/${c.hostId}/subagent`, { sessionId: c.sessionId, profile: params.profile, task: params.task, background: params.background === true }, 4_200_000);
			return { content: [{ type: "text", text: String(answer.text ?? "") }], details: { runId: typeof answer.runId === "string" ? answer.runId : null }, isError: answer.ok !== true };
		},
	});

	pi.registerTool({
		name: "forge_subagent_result",
		label: "pi-forge subagent result",
		description:
			"Read the verified result of a subagent run by its run id (from forge_subagent, for example one started with background: true). A run still waiting or running says so.",
		promptSnippet: "Read the result of a subagent run by its run id",
		parameters: Type.Object({ runId: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
		defaultActive: false,
		async execute(_toolCallId, params) {
			const c = conn;
			if (!c) return { content: [{ type: "text", text: "pi-forge is not connected." }], details: {}, isError: true };
			const answer = await call(c, "POST", `/api/host/${c.hostId}/subagent-result`, { sessionId: c.sessionId, runId: params.runId });
			return { content: [{ type: "text", text: String(answer.text ?? "") }], details: {}, isError: answer.ok !== true };
		},
	});

	pi.registerTool({
		name: "forge_capability",
		label: "pi-forge capability",
		description:
			"List, inspect, enable or disable the capabilities the active pi-forge Preset lets you use. action: list | status | enable | disable; id: a binding id from list (enable) or an activation id or binding id (disable). Capability text applies from your next request.",
		promptSnippet: "List, enable or disable the capabilities the active Preset offers",
		promptGuidelines: ["A capability enabled with forge_capability applies from your next request, not this one."],
		parameters: Type.Object(
			{
				action: Type.Union([Type.Literal("list"), Type.Literal("status"), Type.Literal("enable"), Type.Literal("disable")]),
				id: Type.Optional(Type.String({ maxLength: 128 })),
			},
			{ additionalProperties: false },
		),
		// Offered to the model only while the active Preset has a model-callable binding (the
		// server adds it to the active tools then).
		defaultActive: false,
		async execute(_toolCallId, params) {
			const c = conn;
			if (!c) return { content: [{ type: "text", text: "pi-forge is not connected; capabilities cannot change now." }], details: {}, isError: true };
			const answer = await call(c, "POST", `/api/host/${c.hostId}/capability-tool`, { sessionId: c.sessionId, args: params as unknown as Json }, 35000);
			return { content: [{ type: "text", text: String(answer.text ?? "") }], details: {}, isError: answer.ok !== true };
		},
	});
}
