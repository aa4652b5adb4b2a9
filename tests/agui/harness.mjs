// Drives agentmw's AG-UI endpoint with the official @ag-ui/client HttpAgent, the way a front end does.
// Input (argv[2]): {"url": ..., "threadId": ..., "steps": [{"runId", "say"?, "forwardedProps"?,
//   "resume"?: "resolve" | "cancel" | "partial", "payload"?, "abortAfter"?: "<EVENT_TYPE>", "state"?}]}
// Output (stdout): one JSON line with, per step, the events seen, the result, state and warnings.
import { HttpAgent } from "@ag-ui/client";

const warnings = [];
const originalWarn = console.warn;
console.warn = (...args) => { warnings.push(args.map(String).join(" ")); };

const scenario = JSON.parse(process.argv[2]);
const agent = new HttpAgent({ url: scenario.url, threadId: scenario.threadId, headers: scenario.headers || {} });
const steps = [];
for (const step of scenario.steps) {
  if (step.say) agent.addMessage({ id: `u-${step.runId}`, role: "user", content: step.say });
  if (step.state) agent.setState(step.state);
  const events = [];
  const params = { runId: step.runId, forwardedProps: step.forwardedProps || {} };
  if (step.resume) {
    const pending = agent.pendingInterrupts || [];
    const chosen = step.resume === "partial" ? pending.slice(1) : pending;
    params.resume = chosen.map((i) => (step.resume === "cancel"
      ? { interruptId: i.id, status: "cancelled" }
      : { interruptId: i.id, status: "resolved", payload: step.payload }));
  }
  const record = { runId: step.runId, warningsBefore: warnings.length };
  try {
    const { result } = await agent.runAgent(params, {
      onEvent: ({ event }) => {
        events.push(event);
        if (step.abortAfter && event.type === step.abortAfter) agent.abortRun();
      },
      onRunErrorEvent: ({ event }) => { record.runError = event; },
    });
    record.result = result ?? null;
  } catch (error) {
    record.rejected = String(error && error.message || error);
  }
  record.events = events;
  record.state = agent.state;
  record.messages = agent.messages;
  record.pendingInterrupts = agent.pendingInterrupts || [];
  record.warnings = warnings.slice(record.warningsBefore);
  delete record.warningsBefore;
  steps.push(record);
}
console.warn = originalWarn;
process.stdout.write(JSON.stringify({ steps, warnings }) + "\n");
