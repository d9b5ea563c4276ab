// Drives the web console in Debian's Chromium with playwright-core for tests/console_browser.rs,
// which starts the broker, puts the load on it and passes what to expect as JSON in argv[2]:
//   {phase, base, nodeModules, screenshots, topic, group, key, body, msgId, offsetMsgId,
//    total, newTopic, resetTo}
// Phase "browse" loads every page, clicks through to the topic and the group, creates a topic,
// looks a message up by key and by both ids, and loads a missing page; phase "reset" resets the
// group's offset through the page. Every page is saved as a PNG under `screenshots`. Any
// console error or uncaught exception in a page fails the run, except the one a page expects
// (the 404 of a missing page). Prints one JSON line of what it saw; exits 1 on any failure.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const cfg = JSON.parse(process.argv[2]);
const require = createRequire(path.join(cfg.nodeModules, "index.js"));
const { chromium } = require("playwright-core");

const TIMEOUT_MS = 15000;
const errors = [];
let allowed = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(cfg.screenshots, `${name}.png`), fullPage: true });
}

// A datetime-local value (local time, with seconds) for `ms`.
function localInput(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  // Chromium writes a datetime-local value without ":00" seconds, and Playwright's fill checks
  // the value it reads back, so zero seconds are left out the same way.
  const secs = d.getSeconds() === 0 ? "" : `:${p(d.getSeconds())}`;
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}${secs}`;
}

async function browse(page, seen) {
  const base = cfg.base;
  // Cluster: the broker's row and the live chart, drawn twice (two polls, two points).
  await page.goto(`${base}/`);
  await page.locator("#broker-table .broker-row").first().waitFor();
  seen.brokerRows = await page.locator("#broker-table .broker-row").count();
  seen.brokerText = await page.locator("#broker-table .broker-row").first().innerText();
  await page.waitForTimeout(2500);
  seen.chartLines = await page.locator("#rate-chart polyline").count();
  check(seen.chartLines === 2, `two rate lines drawn, saw ${seen.chartLines}`);
  seen.putRate = Number(await page.locator("#put-rate").innerText());
  await shot(page, "cluster");

  // Topics: the list, then a click through to the topic's queues.
  await page.click('nav a[data-nav="topics"]');
  await page.waitForURL(`${base}/topics`);
  const link = page.locator(`a.topic-link[data-name="${cfg.topic}"]`);
  await link.waitFor();
  await shot(page, "topics");
  await link.click();
  await page.waitForURL(`${base}/topics/${cfg.topic}`);
  await page.locator("#queue-table .queue-row").first().waitFor();
  seen.topicQueues = await page.locator("#queue-table .queue-row").count();
  seen.topicTotal = Number(await page.locator("#topic-total").innerText());
  check(seen.topicTotal === cfg.total, `topic holds ${cfg.total}, page says ${seen.topicTotal}`);
  await shot(page, "topic");

  // Create a topic with the form; the page moves to the new topic's queues.
  await page.goto(`${base}/topics`);
  await page.fill("#new-topic", cfg.newTopic);
  await page.fill("#read-queues", "3");
  await page.fill("#write-queues", "3");
  await page.click("#create-topic");
  await page.waitForURL(`${base}/topics/${cfg.newTopic}`);
  await page.locator("#queue-table .queue-row").first().waitFor();
  seen.newTopicQueues = await page.locator("#queue-table .queue-row").count();
  await shot(page, "topic-created");

  // Consumer groups: the list, then the group's lag per queue and its clients.
  await page.click('nav a[data-nav="groups"]');
  await page.waitForURL(`${base}/groups`);
  const glink = page.locator(`a.group-link[data-name="${cfg.group}"]`);
  await glink.waitFor();
  await shot(page, "groups");
  await glink.click();
  await page.waitForURL(`${base}/groups/${cfg.group}`);
  await page.locator("#group-queue-table .queue-row").first().waitFor();
  seen.groupQueues = await page.locator("#group-queue-table .queue-row").count();
  seen.lagBars = await page.locator("#lag-chart rect.bar").count();
  check(seen.lagBars === seen.groupQueues, `one lag bar per queue (${seen.lagBars} bars, ${seen.groupQueues} queues)`);
  seen.clients = await page.locator("#client-table .client-row").count();
  seen.groupLag = Number(await page.locator("#group-lag").innerText());
  await shot(page, "group");

  // Message lookup by key, by the producer's id with its topic, and by the offset id alone.
  await page.click('nav a[data-nav="messages"]');
  await page.waitForURL(`${base}/messages`);
  await page.fill("#lookup-topic", cfg.topic);
  await page.fill("#lookup-key", cfg.key);
  await page.click("#lookup-by-key");
  await page.locator("#result-count").waitFor();
  seen.byKey = await page.locator(".message .msg-id").allInnerTexts();
  seen.byKeyBody = await page.locator(".message pre.body").first().innerText();
  check(seen.byKeyBody === cfg.body, `body by key: ${seen.byKeyBody}`);
  seen.byKeyProps = await page.locator(".message .msg-props").first().innerText();
  await shot(page, "message-by-key");
  for (const [id, topic, name] of [[cfg.msgId, cfg.topic, "msgid"], [cfg.offsetMsgId, "", "offsetid"]]) {
    await page.fill("#lookup-id", id);
    await page.fill("#lookup-id-topic", topic);
    await page.click("#lookup-by-id");
    await page.waitForFunction((want) => {
      const e = document.querySelector(".message .msg-id");
      return e && e.textContent === want;
    }, cfg.msgId);
    seen[`by_${name}`] = await page.locator(".message pre.body").first().innerText();
    await shot(page, `message-by-${name}`);
  }

  // A missing page: a 404 with a link home that works.
  allowed = [/status of 404/];
  const resp = await page.goto(`${base}/no/such/page`);
  seen.missingStatus = resp.status();
  await shot(page, "missing");
  await page.click("#home-link");
  await page.waitForURL(`${base}/`);
  await page.locator("#broker-table .broker-row").first().waitFor();
  // A topic that does not exist: the page says so in its error banner.
  await page.goto(`${base}/topics/NoSuchTopic_${Date.now()}`);
  await page.locator("#error").waitFor({ state: "visible" });
  seen.missingTopicError = await page.locator("#error").innerText();
  await shot(page, "missing-topic");
  allowed = [];
}

async function reset(page, seen) {
  await page.goto(`${cfg.base}/groups/${cfg.group}`);
  await page.locator("#reset-form").waitFor();
  await page.selectOption("#reset-topic", cfg.topic);
  await page.fill("#reset-time", localInput(cfg.resetTo));
  await page.click("#reset-offset");
  await page.locator("#reset-result tbody tr").first().waitFor();
  seen.resetQueues = await page.locator("#reset-result tbody tr").count();
  seen.notice = await page.locator("#notice").innerText();
  await shot(page, "group-reset");
  await page.reload();
  await page.locator("#group-queue-table .queue-row").first().waitFor();
  seen.groupLag = Number(await page.locator("#group-lag").innerText());
  await shot(page, "group-after-reset");
}

const userData = mkdtempSync(path.join(tmpdir(), "ringmq-chromium-"));
let context;
let failed = null;
const seen = { phase: cfg.phase };
try {
  context = await chromium.launchPersistentContext(userData, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(TIMEOUT_MS);
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (m) => {
    if (m.type() === "error" && !allowed.some((re) => re.test(m.text()))) {
      errors.push(`${page.url()}: console error: ${m.text()}`);
    }
  });
  page.on("pageerror", (e) => errors.push(`${page.url()}: uncaught: ${e.message}`));
  try {
    await (cfg.phase === "reset" ? reset(page, seen) : browse(page, seen));
  } catch (e) {
    // What the page showed when it failed: its error banner and a screenshot.
    seen.failedAt = page.url();
    seen.errorBanner = await page.locator("#error").innerText({ timeout: 1000 }).catch(() => null);
    await shot(page, `failed-${cfg.phase}`).catch(() => {});
    throw e;
  }
  check(errors.length === 0, `no console errors, saw: ${errors.join(" | ")}`);
} catch (e) {
  failed = e;
} finally {
  if (context) await context.close().catch(() => {});
  rmSync(userData, { recursive: true, force: true });
}
console.log(JSON.stringify(seen));
if (failed) {
  console.error(`console.mjs (${cfg.phase}): ${failed.stack || failed}`);
  process.exit(1);
}
