// The sign-in form: the token, once, in exchange for an HttpOnly session cookie.
import { type Html, html } from './html.ts';
import { type Chrome, csrfField, layout } from './layout.ts';

export function loginPage(chrome: Chrome, next: string, error?: string): Html {
  const body = html`<h1>Sign in</h1>
    <p>This deepq inspector needs its token (<code>DEEPQ_UI_TOKEN</code>).</p>
    ${error ? html`<p class="error" role="alert">${error}</p>` : ''}
    <form method="post" action="/login" class="login">
      ${csrfField(chrome)}
      <input type="hidden" name="next" value="${next}" />
      <label>Token<input type="password" name="token" autocomplete="current-password" required /></label>
      <button class="primary">Sign in</button>
    </form>`;
  return layout({ ...chrome, signOut: false }, 'Sign in', body);
}
