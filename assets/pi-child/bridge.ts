// pi-forge child bridge: loaded with `-e` into a clean child `pi --mode json` that runs one
// approved delegation plan. It forces exactly the approved system prompt and messages, blocks
// every tool the plan did not approve, and records each provider request so pi-forge can check
// it against the plan. No rule lives here: pi-forge wrote the input and verifies the record.

import { appendFileSync, readFileSync } from "node:fs";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

interface ChildInput {
	systemPrompt: string;
	messages: unknown[];
	tools: string[];
	payloadOut: string;
}

export default function forgeChild(pi: ExtensionAPI) {
	const path = process.env.PI_FORGE_CHILD_INPUT;
	if (!path) throw new Error("pi-forge child bridge: PI_FORGE_CHILD_INPUT is not set");
	const input = JSON.parse(readFileSync(path, "utf8")) as ChildInput;

	pi.on("before_agent_start", () => ({ systemPrompt: input.systemPrompt }));

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

	pi.on("before_provider_request", (event) => {
		appendFileSync(input.payloadOut, `${JSON.stringify(event.payload)}\n`, { mode: 0o600 });
		return undefined;
	});
}
