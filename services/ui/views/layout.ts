// The page shell: navigation, the stylesheet, and (on pages that update live) the one
// client script, all served by the app itself: no CDN, no inline script.
import { type Html, html } from './html.ts';

/** What every page needs besides its body. */
export interface Chrome {
  /** The CSRF token the page's forms repeat. */
  csrf: string;
  /** A token is set: show "sign out". */
  signOut: boolean;
}

export function csrfField(chrome: Pick<Chrome, 'csrf'>): Html {
  return html`<input type="hidden" name="_csrf" value="${chrome.csrf}" />`;
}

export function layout(chrome: Chrome, title: string, body: Html, opts: { script?: string } = {}): Html {
  const signOut = chrome.signOut
    ? html`<form method="post" action="/logout" class="inline">${csrfField(chrome)}<button>Sign out</button></form>`
    : '';
  return html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="csrf-token" content="${chrome.csrf}" />
    <title>${title} · deepq</title>
    <link rel="stylesheet" href="/static/ui.css" />
    ${opts.script ? html`<script type="module" src="${opts.script}"></script>` : ''}
  </head>
  <body>
    <nav class="top">
      <a href="/" class="brand">deepq</a>
      <a href="/">Goals</a>
      <a href="/queues-overview">Queues</a>
      <a href="/queues">bull-board</a>
      <span class="spacer"></span>
      ${signOut}
    </nav>
    <main>${body}</main>
  </body>
</html>`;
}
