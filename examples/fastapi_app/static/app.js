// The example page: one AG-UI agent (the procurement assistant skill) driven with @ag-ui/client; the A2UI
// surfaces it sends (the budget check) drawn by the official A2UI renderer, @a2ui/lit (docs/a2ui.md).
import { HttpAgent } from "/static/vendor/ag-ui-client.js";
import { ContextProvider, Context, MessageProcessor, basicCatalog } from "/static/vendor/a2ui.js";

const $ = (id) => document.getElementById(id);
const timeline = $("timeline");
const agent = new HttpAgent({
  url: "/agui/procurement_assistant",
  threadId: `thread-${crypto.randomUUID()}`,
  headers: { Authorization: "Bearer demo-token" },  // the app's own auth, reused by agentmw
});
let pending = null;
const items = new Map();

function add(kind, id, html) {
  const li = document.createElement("li");
  li.className = kind;
  li.innerHTML = html;
  if (id) { li.dataset.id = id; items.set(id, li); }
  li.dataset.testid = kind;
  li.setAttribute("data-testid", kind);
  timeline.appendChild(li);
  return li;
}
const escape = (text) => String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

const subscriber = {
  onEvent({ event }) {
    switch (event.type) {
      case "RUN_STARTED": {
        // With telemetry on (OTEL_TRACES_EXPORTER), each run carries its trace: show the id to look it up by.
        const trace = event.metadata && event.metadata.traceId;
        if (trace) {
          add("run", null, `trace <code class="trace-id">${escape(trace)}</code>`)
            .title = `traceparent ${event.metadata.traceparent || ""}`;
        }
        break;
      }
      case "STEP_STARTED": add("step running", `step-${event.stepName}`, escape(event.stepName)); break;
      case "STEP_FINISHED": { const li = items.get(`step-${event.stepName}`); if (li) li.className = "step done"; break; }
      case "TOOL_CALL_START":
        add("tool loading", event.toolCallId, `<strong>${escape(event.toolCallName)}</strong>
          <div><code class="args"></code></div><div class="result"></div>`); break;
      case "TOOL_CALL_ARGS": items.get(event.toolCallId).querySelector(".args").textContent += event.delta; break;
      case "TOOL_CALL_RESULT": {
        const li = items.get(event.toolCallId);
        li.classList.remove("loading");
        if (event.metadata && event.metadata.isError) li.classList.add("error");
        li.querySelector(".result").textContent = event.content; break;
      }
      case "TEXT_MESSAGE_START": add("text", event.messageId, ""); break;
      case "TEXT_MESSAGE_CONTENT": items.get(event.messageId).textContent += event.delta; break;
      case "REASONING_MESSAGE_START": add("reasoning", event.messageId, ""); break;
      case "REASONING_MESSAGE_CONTENT": items.get(event.messageId).textContent += event.delta; break;
      case "ACTIVITY_SNAPSHOT":
        if (event.activityType === "a2ui-surface") showSurface(event);
        else $("status").textContent = event.content.message || "";
        break;
      case "RUN_FINISHED":
        if (event.outcome && event.outcome.type === "interrupt") showApproval(event.outcome.interrupts[0]);
        else $("status").textContent = "Done.";
        break;
      case "RUN_ERROR": $("status").textContent = `Error: ${event.message}`; break;
    }
  },
  onStateChanged({ state }) { $("state").textContent = JSON.stringify(state, null, 2); },
};

// An "a2ui-surface" activity holds every A2UI message that draws its surface, and each snapshot replaces the
// last: draw it afresh, with a processor of its own, in the same place in the timeline.
// A2UI Text may hold simple Markdown; this page shows it as plain text (escaped: an agent's text never becomes
// markup here), which is what the renderer asks a Markdown renderer for.
const plainText = async (text) => escape(text);

function showSurface(event) {
  let li = items.get(event.messageId);
  if (!li) {
    li = add("surface", event.messageId, "");
    new ContextProvider(li, { context: Context.markdown, initialValue: plainText });
  }
  const processor = new MessageProcessor([basicCatalog]);
  processor.onSurfaceCreated((surface) => {
    const element = document.createElement("a2ui-surface");
    element.surface = surface;
    li.replaceChildren(element);
  });
  processor.processMessages(event.content.a2ui_operations);
}

function showApproval(interrupt) {
  pending = interrupt;
  $("approval-message").textContent = interrupt.message;
  const action = (interrupt.responseSchema && interrupt.responseSchema["x-action"]) || {};
  $("approval-action").textContent = JSON.stringify(action, null, 2);
  $("approval").hidden = false;
  $("status").textContent = "Waiting for your decision.";
}

async function run(parameters) {
  $("send").disabled = true;
  try {
    await agent.runAgent({ runId: `run-${crypto.randomUUID()}`, ...parameters }, subscriber);
  } catch (error) {
    $("status").textContent = `Error: ${error.message}`;
  } finally {
    $("send").disabled = false;
  }
}

$("ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const content = $("request").value.trim();
  if (!content) return;
  add("user", null, escape(content));
  agent.addMessage({ id: `user-${crypto.randomUUID()}`, role: "user", content });
  run({});
});

for (const [button, approved] of [["approve", true], ["reject", false]]) {
  $(button).addEventListener("click", () => {
    if (!pending) return;
    const interruptId = pending.id;
    pending = null;
    $("approval").hidden = true;
    run({ resume: [{ interruptId, status: "resolved", payload: { approved } }] });
  });
}
