import { useLive, wire } from '../api';
import { BASE, Link } from '../router';
import { Badge, Empty, ErrorBox, Loading, short, Time } from '../ui';

export function FactoriesPage() {
  const list = useLive(() => wire.call('listFactories', { query: { limit: 100 } }), [], 5000);
  return (
    <section>
      <div class="pagehead">
        <h1>Factories</h1>
      </div>
      <ErrorBox error={list.error} />
      {!list.data ? (
        list.loading && <Loading what="Loading factories" />
      ) : list.data.factories.length === 0 ? (
        <Empty title="No factories in this team">
          Register one with <code>npx factoryd factories add NAME --repo URL_OR_PATH</code>.
        </Empty>
      ) : (
        <div class="cards">
          {list.data.factories.map((f) => (
            <Link key={f.uid} href={`${BASE}/factories/${f.uid}`} class="card factory">
              <div class="cardhead">
                <strong>{f.name}</strong>
                <Badge value={f.ready ? 'applied' : 'failed'} label={f.ready ? 'Ready' : 'Not ready'} />
              </div>
              {f.description && <p class="muted">{f.description}</p>}
              {!f.ready && (
                <p
                  class="small-text bad-text wrap clamp3"
                  data-testid="not-ready"
                  title={f.message ?? undefined}
                >
                  {f.reason ?? 'Not applied'}
                  {f.message ? `: ${f.message}` : ''}
                </p>
              )}
              <p class="small-text mono wrap">{f.managed ? 'managed' : `${f.repository} @ ${f.branch}`}</p>
              <p class="small-text muted">
                applied {short(f.last_applied_revision)} · updated <Time iso={f.updated_at} />
              </p>
            </Link>
          ))}
        </div>
      )}
    </section>
  );
}
