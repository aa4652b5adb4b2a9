// An MCP Apps host, end to end: the official MCP client (@modelcontextprotocol/client) on the real server, and
// headless Chromium rendering the tool's ui:// resource in a sandboxed iframe, driven by the official AppBridge.
// argv: one JSON object {url, token, tool, arguments, click}: call `tool` as the bearer `token`, render the UI
// its descriptor names with the call's input and result, then click the card's `click` button ("approve" or
// "reject"); the tools/call the card then sends through the bridge is performed on the server, as the same user.
// `click` null: no click; what the card shows once it has the result (and whether its buttons are shown).
// Prints one JSON line (what the card showed before and after, the calls relayed); exits non-zero on failure.
import { createReadStream } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { chromium } from "playwright-core";

const EXTENSION_ID = "io.modelcontextprotocol/ui";
const APP_MIME_TYPE = "text/html;profile=mcp-app";
const { url, token, tool, arguments: args, click } = JSON.parse(process.argv[2]);
const here = fileURLToPath(new URL(".", import.meta.url));

// The host's MCP connection: it declares the extension, as a host that renders MCP Apps does.
const mcp = new Client(
  { name: "agentmw-test-host", version: "1.0.0" },
  { capabilities: { extensions: { [EXTENSION_ID]: { mimeTypes: [APP_MIME_TYPE] } } } },
);
await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { authProvider: { token: async () => token } }));

// Only the harness page and the packages it imports, from this folder.
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript" };
const files = createServer((request, response) => {
  const path = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^\/+/, "");
  if (path.startsWith("..") || !(path === "harness.html" || path.startsWith("node_modules/")) || !TYPES[extname(path)]) {
    response.writeHead(404).end();
    return;
  }
  const stream = createReadStream(join(here, path));
  stream.on("error", () => response.writeHead(404).end());
  stream.on("open", () => response.writeHead(200, { "content-type": TYPES[extname(path)] }));
  stream.pipe(response);
});
await new Promise((resolve) => files.listen(0, "127.0.0.1", resolve));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const problems = [];
try {
  const serverCapabilities = mcp.getServerCapabilities();
  const listed = (await mcp.listTools()).tools.find((t) => t.name === tool);
  const ui = listed && listed._meta && listed._meta.ui;
  if (!ui || !ui.resourceUri) throw new Error(`${tool} names no UI: ${JSON.stringify(listed)}`);
  const read = await mcp.readResource({ uri: ui.resourceUri });
  const content = read.contents[0];
  if (content.mimeType !== APP_MIME_TYPE) throw new Error(`the UI is ${content.mimeType}, not ${APP_MIME_TYPE}`);
  const result = await mcp.callTool({ name: tool, arguments: args });

  const page = await browser.newPage();
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
  page.on("console", (message) => { if (message.type() === "error") problems.push(`console: ${message.text()}`); });
  const relayed = [];
  await page.exposeFunction("hostCallTool", async (params) => {
    relayed.push(params);
    return await mcp.callTool(params); // what the card asked, performed on the server with this user's token
  });
  const { port } = files.address();
  await page.goto(`http://127.0.0.1:${port}/harness.html`, { waitUntil: "load" });
  await page.waitForFunction(() => window.harnessReady === true, null, { timeout: 10000 });
  await page.evaluate((call) => window.render(call), {
    html: content.text, ui: (content._meta && content._meta.ui) || {}, toolInput: args, toolResult: result,
  });
  const card = page.frameLocator("iframe");
  const status = card.locator("#status");
  await page.waitForFunction(() => window.hostLog.initialized, null, { timeout: 10000 });
  if (click) await card.locator("#decide").waitFor({ state: "visible", timeout: 10000 });
  else await card.locator("#status.pending, #status.approved, #status.rejected").waitFor({ timeout: 10000 });
  const before = {
    status: await status.textContent(),
    title: await card.locator("#title").textContent(),
    summary: await card.locator("#summary").textContent(),
    details: await card.locator("#details").textContent(),
    buttons: await card.locator("#decide").isVisible(),
    waiting: (await card.locator("#waiting").isVisible()) ? await card.locator("#waiting").textContent() : null,
  };
  let after = null;
  if (click) {
    await card.locator(`#${click}`).click();
    await page.waitForFunction(() => window.hostLog.calls.length > 0, null, { timeout: 10000 });
    // the card shows the server's answer: the decided approval, or why it was refused
    await card.locator("#error:not(:empty), #status.approved, #status.rejected").first().waitFor({ timeout: 15000 });
    after = {
      status: await status.textContent(),
      details: await card.locator("#details").textContent(),
      error: await card.locator("#error").textContent(),
    };
  }
  const log = await page.evaluate(() => window.hostLog);
  console.log(JSON.stringify({
    extensions: serverCapabilities && serverCapabilities.extensions, ui, resourceMeta: content._meta,
    result: { isError: result.isError, structuredContent: result.structuredContent, _meta: result._meta },
    before, after, bridgeCalls: log.calls, relayed, appInfo: log.appInfo, sizes: log.sizes, problems,
  }));
} catch (error) {
  console.error(JSON.stringify({ error: String((error && error.stack) || error).slice(0, 1500), problems }));
  process.exitCode = 1;
} finally {
  await browser.close();
  files.close();
  await mcp.close();
}
