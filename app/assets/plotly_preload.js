// Loads plotly.js (~4.6 MB, 1-1.6 s of main thread to evaluate in headless Chromium) while the user
// reads, so a page with no graph of its own (Operations: a grid) does not leave it to the first
// graph's click. It starts only when the page has been quiet for QUIET_MS: no Dash request in
// flight or answered, no pointer, key or wheel input. A fixed timer after the app's load (s25) made
// the evaluation land inside early clicks (a Summary visit 268 -> 1,005 ms, bench/viewer_browser.py).
(() => {
  const QUIET_MS = 1500;  // a user reading; a click in this window means the user is acting
  const SLOT = 'plotly-preload';  // app/ids.py PLOTLY_PRELOAD
  let last = performance.now(), inflight = 0;
  const mark = () => { last = performance.now(); };
  for (const type of ['pointerdown', 'pointermove', 'keydown', 'wheel', 'touchstart']) {
    window.addEventListener(type, mark, {capture: true, passive: true});
  }
  const fetchBefore = window.fetch;
  window.fetch = function (input) {
    const url = typeof input === 'string' ? input : (input && input.url) || '';
    if (!url.includes('_dash-')) return fetchBefore.apply(this, arguments);
    inflight += 1; mark();
    return fetchBefore.apply(this, arguments).finally(() => { inflight -= 1; mark(); });
  };
  const timer = setInterval(() => {
    if (window.Plotly) { clearInterval(timer); return; }  // a page's graph loaded it already
    const dc = window.dash_clientside;
    if (inflight > 0 || performance.now() - last < QUIET_MS || !dc || !dc.set_props
        || !document.getElementById(SLOT)) return;
    clearInterval(timer);
    // A static graph with no data: dcc loads its plotly.js bundle to draw it; nothing is shown.
    dc.set_props(SLOT, {children: {type: 'Graph', namespace: 'dash_core_components',
                                   props: {config: {staticPlot: true}}}});
  }, 250);
})();
