// In headless Chromium: a page on one origin runs an AG-UI skill served by another origin, with the official
// client (the example's vendored @ag-ui/client bundle); a page on an origin the app's CORS policy does not list
// tries the same, and a no-preflight ("simple") POST carrying the same JSON.
// argv: <front page url> <evil page url> <AG-UI endpoint url>. Both page hosts resolve to 127.0.0.1.
// Prints one JSON line; exits non-zero when the script itself fails.
import { chromium } from "playwright-core";

const [front, evil, endpoint] = process.argv.slice(2);
const hosts = [front, evil].map((url) => new URL(url).hostname);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         `--host-resolver-rules=${hosts.map((h) => `MAP ${h} 127.0.0.1`).join(", ")}`],
});

async function open(url) {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
  await page.goto(url, { waitUntil: "load" });
  await page.waitForFunction(() => typeof window.runSkill === "function", null, { timeout: 15000 });
  return { page, problems };
}

try {
  const allowed = await open(front);
  const run = await allowed.page.evaluate((url) => window.runSkill(url, "from the front end"), endpoint);
  const foreign = await open(evil);
  const refused = await foreign.page.evaluate((url) => window.runSkill(url, "from evil"), endpoint);
  const simple = await foreign.page.evaluate((url) => window.simplePost(url, "from evil, no preflight"), endpoint);
  console.log(JSON.stringify({ origin: await allowed.page.evaluate(() => location.origin),
                               evilOrigin: await foreign.page.evaluate(() => location.origin),
                               run, refused, simple, problems: [...allowed.problems, ...foreign.problems] }));
} catch (error) {
  console.error(JSON.stringify({ error: String(error && error.message || error).slice(0, 400) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
