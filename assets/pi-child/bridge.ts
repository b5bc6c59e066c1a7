// pi-forge child bridge: loaded with `-e` into a clean child `pi --mode json` that runs one
// approved delegation plan. It forces exactly the approved system prompt and messages, blocks
// every tool the plan did not approve, and hands each provider request to pi-forge BEFORE it is
// sent: the request leaves only when pi-forge answers `ok`. No rule lives here: pi-forge wrote the
// input and compares the request with the plan (forge-core `delegation::verify`); on any other
// answer, or when pi-forge cannot be reached, the child exits before the provider sees anything.

import { readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

interface ChildInput {
	systemPrompt: string;
	messages: unknown[];
	tools: string[];
	factsOut: string;
	/** Where pi-forge checks each request: a loopback port and this run's nonce. */
	check: { port: number; nonce: string };
}

/** Exit code of a child stopped before a request pi-forge did not approve. */
const REFUSED = 70;

/** Sends `<nonce>\n<payload>` and resolves with pi-forge's answer ("" when it cannot be reached). */
function ask(check: ChildInput["check"], payload: string): Promise<string> {
	return new Promise((resolve) => {
		let answer = "";
		const socket = connect({ host: "127.0.0.1", port: check.port }, () => {
			socket.end(`${check.nonce}\n${payload}\n`);
		});
		socket.setEncoding("utf8");
		socket.on("data", (chunk: string) => {
			answer += chunk;
		});
		socket.on("close", () => resolve(answer.trim()));
		socket.on("error", () => resolve(""));
	});
}

export default function forgeChild(pi: ExtensionAPI) {
	const path = process.env.PI_FORGE_CHILD_INPUT;
	if (!path) throw new Error("pi-forge child bridge: PI_FORGE_CHILD_INPUT is not set");
	const input = JSON.parse(readFileSync(path, "utf8")) as ChildInput;

	pi.on("before_agent_start", () => {
		// The thinking level Pi actually uses (it clamps the requested one to the model).
		writeFileSync(input.factsOut, JSON.stringify({ thinkingLevel: pi.getThinkingLevel() }), { mode: 0o600 });
		return { systemPrompt: input.systemPrompt };
	});

	// The child starts from one placeholder prompt: it is replaced by the approved messages in
	// every request, and whatever the run added after it (tool calls, results) follows.
	pi.on("context", (event) => ({
		messages: [...(input.messages as typeof event.messages), ...event.messages.slice(1)],
	}));

	pi.on("tool_call", (event) => {
		if (!input.tools.includes(event.toolName)) {
			return { block: true, reason: `pi-forge: the approved plan does not include the tool ${event.toolName}.` };
		}
	});

	// Pi awaits this handler before the HTTP call; a thrown error would not stop the request
	// (Pi reports it and sends anyway), so a refusal exits the process.
	pi.on("before_provider_request", async (event) => {
		const verdict = await ask(input.check, JSON.stringify(event.payload));
		if (verdict !== "ok") {
			process.stderr.write("pi-forge: the provider request differs from the approved plan; it was not sent.\n");
			process.exit(REFUSED);
		}
		return undefined;
	});
}
