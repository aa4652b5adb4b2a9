// End to end in headless Chromium: the example page, a request, the tool cards, approval, the answer.
// argv: <base url> <screenshot path>. Prints one JSON line; exits non-zero on any failure.
import { chromium } from "playwright-core";

const [base, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const problems = [];
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
  page.on("console", (message) => { if (message.type() === "error" || message.type() === "warning") problems.push(`console ${message.type()}: ${message.text()}`); });
  page.on("requestfailed", (request) => { if (!request.url().includes("/agui/")) problems.push(`requestfailed: ${request.url()}`); });
  await page.goto(base + "/", { waitUntil: "load" });
  await page.getByTestId("request").fill("Buy 2 monitors for engineering");
  await page.getByTestId("send").click();
  const approval = page.getByTestId("approval");
  await approval.waitFor({ state: "visible", timeout: 15000 });
  const tools = await page.locator("li.tool").evaluateAll((cards) => cards.map((c) => ({
    name: c.querySelector("strong").textContent, loading: c.classList.contains("loading"),
    result: c.querySelector(".result").textContent })));
  const steps = await page.locator("li.step").allTextContents();
  const message = await page.getByTestId("approval-message").textContent();
  const action = JSON.parse(await page.getByTestId("approval-action").textContent());
  const traceIds = () => page.locator("li.run code.trace-id").allTextContents();  // one per run, when traced
  const tracesBefore = await traceIds();
  await page.getByTestId("approve").click();
  const finalText = page.locator("li.text").last();
  await page.waitForFunction(() => [...document.querySelectorAll("li.text")].some((li) => li.textContent.startsWith("Submitted")), null, { timeout: 15000 });
  const answer = await finalText.textContent();
  const state = JSON.parse(await page.getByTestId("state").textContent());
  const toolsAfter = await page.locator("li.tool strong").allTextContents();
  const traces = await traceIds();
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ tools, toolsAfter, steps, message, action, answer, state, tracesBefore, traces,
                              problems }));
} catch (error) {
  console.error(JSON.stringify({ error: String(error && error.message || error).slice(0, 400), problems }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
