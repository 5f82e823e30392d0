// Drives Argo's web UI in Debian's chromium with playwright-core, for ui_test.go:
//   node ui.cjs inspect URL SHOT   prints {"nodes": [{"label", "classes"}]} of the Workflow's graph
//   node ui.cjs retry URL SHOT     presses the Workflow's RETRY, then the panel's Retry
//   node ui.cjs logs URL SHOT TEXT opens URL (a node's log tab) and waits until the log the
//                                  panel loaded holds TEXT
// SHOT is the screenshot to save. CHROMIUM names the browser (default /usr/bin/chromium).
const {chromium} = require('playwright-core');

async function main() {
    const [mode, url, shot, text] = process.argv.slice(2);
    const browser = await chromium.launch({
        executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    try {
        const page = await browser.newPage({viewport: {width: 1600, height: 1000}});
        // The log panel draws its text on a canvas (xterm): what it shows is what argo
        // server sent it, so read that as it passes.
        let logs = '';
        if (mode === 'logs') {
            await page.route(/\/api\/v1\/workflows\/.*\/log\?/, async route => {
                const response = await route.fetch();
                const body = await response.text();
                logs += body;
                await route.fulfill({response, body});
            });
            // The welcome dialogs first, which the log panel would cover.
            await page.goto(url.split('?')[0]);
            await page.waitForFunction(() => document.querySelectorAll('svg g.node').length >= 7, null, {timeout: 60000});
            await dismissDialogs(page);
        }
        await page.goto(url);
        // The graph: one g.node per Workflow node (the DAG and its steps), each with a
        // <title>"<node id> (<label>)"</title> beside it and its phase as a class.
        await page.waitForFunction(() => document.querySelectorAll('svg g.node').length >= 7, null, {timeout: 60000});
        if (mode !== 'logs') {
            await dismissDialogs(page);
        }
        if (mode === 'inspect') {
            const nodes = await page.$$eval('svg g.node', els =>
                els.map(e => {
                    const title = e.parentElement.querySelector('title').textContent.trim();
                    const m = title.match(/\(([^()]*)\)$/);
                    return {label: m ? m[1] : title, classes: [...e.classList].filter(c => c !== 'node')};
                }),
            );
            await page.screenshot({path: shot});
            console.log(JSON.stringify({nodes}));
        } else if (mode === 'retry') {
            // The toolbar's RETRY opens the retry panel, whose own Retry button submits. By
            // text, not role: an icon font's glyph is part of a button's accessible name.
            const retry = page.locator('button.argo-button', {hasText: /^\s*retry\s*$/i});
            await retry.first().click();
            await page.getByRole('heading', {name: 'Retry Workflow'}).waitFor({timeout: 15000});
            const submit = retry.last();
            await page.screenshot({path: shot.replace(/\.png$/, '-panel.png')});
            await submit.click();
            // The panel closes once the API accepted the retry.
            await submit.waitFor({state: 'detached', timeout: 30000});
            await page.screenshot({path: shot});
            console.log(JSON.stringify({retried: true}));
        } else if (mode === 'logs') {
            for (let i = 0; i < 600 && !logs.includes(text); i++) {
                await page.waitForTimeout(100);
            }
            await page.locator('.log-box').first().waitFor({timeout: 30000});
            await page.waitForTimeout(1000); // let the panel draw, for the screenshot
            await page.screenshot({path: shot});
            console.log(JSON.stringify({found: logs.includes(text), bytes: logs.length}));
        } else {
            throw new Error('unknown mode ' + mode);
        }
    } finally {
        await browser.close();
    }
}

// dismissDialogs closes the welcome dialogs a first visit shows.
async function dismissDialogs(page) {
    for (let i = 0; i < 3; i++) {
        const close = page.locator('.modal-close');
        try {
            await close.first().waitFor({timeout: 2000});
        } catch {
            return;
        }
        await close.first().click();
    }
}

main().catch(err => {
    console.error(err.stack || String(err));
    process.exit(1);
});
