// The example page in headless Chromium: the budget check arrives as an A2UI surface (an AG-UI "a2ui-surface"
// activity) and the official renderer (@a2ui/lit, bundled in static/vendor/a2ui.js) draws it; after the
// approval the skill updates the surface's data and the drawn card changes in place.
// argv: <base url> <screenshot path>. Prints one JSON line; exits non-zero on any failure.
import { chromium } from "playwright-core";

const [base, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const problems = [];
// The text a person sees in the surface: the renderer draws inside shadow roots, which textContent skips.
const drawn = () => {
  const walk = (node, pieces) => {  // each text node a piece: two Texts side by side are two words
    if (node.nodeType === Node.TEXT_NODE) pieces.push(node.textContent);
    if (node.nodeName === "STYLE" || node.nodeName === "SCRIPT") return pieces;
    if (node.shadowRoot) walk(node.shadowRoot, pieces);
    for (const child of node.childNodes) walk(child, pieces);
    return pieces;
  };
  const surfaces = [...document.querySelectorAll("li.surface")];
  return surfaces.map((li) => walk(li, []).join(" ").replace(/\s+/g, " ").trim());
};
try {
  const page = await browser.newPage();
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
  page.on("console", (message) => { if (message.type() === "error" || message.type() === "warning") problems.push(`console ${message.type()}: ${message.text()}`); });
  page.on("requestfailed", (request) => { if (!request.url().includes("/agui/")) problems.push(`requestfailed: ${request.url()}`); });
  await page.goto(base + "/", { waitUntil: "load" });
  await page.getByTestId("request").fill("Buy 2 monitors for engineering");
  await page.getByTestId("send").click();
  await page.getByTestId("approval").waitFor({ state: "visible", timeout: 15000 });
  await page.waitForFunction(`(${drawn})().some((t) => t.includes("Remaining"))`, null, { timeout: 15000 });
  const before = await page.evaluate(drawn);
  const elements = await page.locator("li.surface a2ui-surface").count();
  const timeline = await page.locator("#timeline > li").evaluateAll((lis) => lis.map((li) => li.className));
  const heading = await page.locator("li.surface").getByText("Engineering budget").count();  // pierces shadow DOM
  await page.getByTestId("approve").click();
  await page.waitForFunction(`(${drawn})().some((t) => t.includes("Submitted as PR-"))`, null, { timeout: 15000 });
  const after = await page.evaluate(drawn);
  const answer = await page.locator("li.text").last().textContent();
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ before, after, elements, heading, timeline, answer, problems }));
} catch (error) {
  console.error(JSON.stringify({ error: String(error && error.message || error).slice(0, 400), problems }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
