// A refusal or a missing thing, said in a sentence, with a way back.
import { type Html, html } from './html.ts';
import { type Chrome, layout } from './layout.ts';

export function errorPage(chrome: Chrome, title: string, message: string, back = '/'): Html {
  const body = html`<h1>${title}</h1>
    <p class="error">${message}</p>
    <p><a href="${back}">Back</a></p>`;
  return layout(chrome, title, body);
}
