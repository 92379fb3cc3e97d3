import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiProblem, useSessionState, type Session } from './api';
import { BASE, Link, match, navigate, usePath } from './router';
import { ErrorBox } from './ui';
import { RunsPage } from './pages/runs';
import { RunPage } from './pages/run';
import { FactoriesPage } from './pages/factories';
import { FactoryPage } from './pages/factory';
import { WebhookPage } from './pages/webhook';
import { SkillsPage, WorkersPage } from './pages/team';

function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [key, setKey] = useState('');
  const [who, setWho] = useState<Omit<Session, 'key' | 'team'>>();
  const [team, setTeam] = useState('');
  const [error, setError] = useState<ApiProblem>();
  const [pending, setPending] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    if (who) {
      const chosen = who.teams.find((t) => t.uid === team);
      if (chosen) onSignedIn({ ...who, key: key.trim(), team: chosen });
      return;
    }
    setPending(true);
    try {
      const me = await api.whoAmI(key.trim());
      if (me.teams.length === 0) throw new ApiProblem(403, 'No team', 'This API key belongs to no team.');
      if (me.teams.length === 1) onSignedIn({ ...me, key: key.trim(), team: me.teams[0] });
      else {
        setWho(me);
        setTeam(me.teams[0].uid);
      }
    } catch (err) {
      setError(err as ApiProblem);
    } finally {
      setPending(false);
    }
  };
  return (
    <main class="signin">
      <form class="card" onSubmit={submit} autocomplete="off">
        <h1>
          <span class="logo" aria-hidden="true">
            ◆
          </span>{' '}
          factoryd
        </h1>
        <p class="muted">
          Sign in with an API key. It stays in this tab only and is sent in a header, never in a URL.
        </p>
        <label>
          API key
          <input
            type="password"
            name="api-key"
            value={key}
            autoFocus
            required
            disabled={!!who}
            spellcheck={false}
            onInput={(e) => setKey(e.currentTarget.value)}
          />
        </label>
        {who && (
          <label>
            Team
            <select value={team} onChange={(e) => setTeam(e.currentTarget.value)} autoFocus>
              {who.teams.map((t) => (
                <option key={t.uid} value={t.uid}>
                  {t.name} ({t.uid})
                </option>
              ))}
            </select>
          </label>
        )}
        <ErrorBox error={error} title="Sign-in failed" />
        <button type="submit" class="primary" disabled={pending}>
          {who ? 'Continue' : pending ? 'Checking…' : 'Sign in'}
        </button>
        <p class="muted small-text">
          No key yet?{' '}
          <code>
            npx factoryd api-keys create --team default --scopes runs:read,runs:write,factory:manage
          </code>
        </p>
      </form>
    </main>
  );
}

const NAV = [
  { href: `${BASE}/runs`, label: 'Runs', id: 'runs' },
  { href: `${BASE}/factories`, label: 'Factories', id: 'factories' },
  { href: `${BASE}/skills`, label: 'Skills', id: 'skills' },
  { href: `${BASE}/workers`, label: 'Workers', id: 'workers' },
];

function Page({ path }: { path: string }) {
  let m;
  if ((m = match('/ui/runs/:id', path))) return <RunPage id={m.id} />;
  if (match('/ui/runs', path)) return <RunsPage />;
  if ((m = match('/ui/factories/:uid/:tab', path))) return <FactoryPage uid={m.uid} tab={m.tab} />;
  if ((m = match('/ui/factories/:uid', path))) return <FactoryPage uid={m.uid} tab="overview" />;
  if (match('/ui/factories', path)) return <FactoriesPage />;
  if ((m = match('/ui/webhooks/:uid', path))) return <WebhookPage uid={m.uid} />;
  if (match('/ui/skills', path)) return <SkillsPage />;
  if (match('/ui/workers', path)) return <WorkersPage />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        Nothing lives at <code>{path}</code>. <Link href={`${BASE}/runs`}>Go to runs</Link>.
      </p>
    </section>
  );
}

function App() {
  const [session, setSession] = useSessionState();
  const path = usePath();
  useEffect(() => {
    if (match('/ui', path) || path === '/') navigate(`${BASE}/runs`, true);
  }, [path]);
  if (!session) return <SignIn onSignedIn={setSession} />;
  const section = path.split('/')[2] === 'webhooks' ? 'factories' : path.split('/')[2];
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href={`${BASE}/runs`} class="brand">
          <span class="logo" aria-hidden="true">
            ◆
          </span>{' '}
          factoryd
        </Link>
        <nav aria-label="Main" class="mainnav">
          {NAV.map((n) => (
            <Link key={n.id} href={n.href} aria-current={section === n.id ? 'page' : undefined}>
              {n.label}
            </Link>
          ))}
        </nav>
        <div class="who">
          {session.teams.length > 1 ? (
            <select
              aria-label="Team"
              value={session.team.uid}
              onChange={(e) => {
                const team = session.teams.find((t) => t.uid === e.currentTarget.value)!;
                setSession({ ...session, team });
                navigate(`${BASE}/runs`);
              }}
            >
              {session.teams.map((t) => (
                <option key={t.uid} value={t.uid}>
                  {t.name}
                </option>
              ))}
            </select>
          ) : (
            <span class="team" title={session.team.uid}>
              {session.team.name}
            </span>
          )}
          <span class="scopes" aria-label="Scopes of this key" data-testid="scopes">
            {session.scopes.map((s) => (
              <span key={s} class="scope">
                {s}
              </span>
            ))}
          </span>
          <button type="button" class="ghost" onClick={() => setSession(undefined)}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" key={session.team.uid}>
        <Page path={path} />
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
