import { useState } from 'preact/hooks';
import { currentTeam, useLive, wire } from '../api';
import { CopyField, Empty, ErrorBox, Loading, Time } from '../ui';

export function SkillsPage() {
  const [since, setSince] = useState('');
  const usage = useLive(() => wire.call('skillUsage', { query: { since } }), [since], 10000);
  return (
    <section>
      <div class="pagehead">
        <h1>Skills usage</h1>
        <label class="inline">
          Since
          <input type="date" value={since} onChange={(e) => setSince(e.currentTarget.value)} />
        </label>
      </div>
      <p class="muted">
        Loads of the skills your factories manage (their <code>skills/</code> folders), from the runs’{' '}
        <code>read_skill</code> actions.
      </p>
      <ErrorBox error={usage.error} />
      {!usage.data ? (
        <Loading />
      ) : (
        <>
          {usage.data.skills.length === 0 ? (
            <Empty title="No team skill loaded yet">
              When an agent loads a skill from a factory’s skills/ folder, it is counted here.
            </Empty>
          ) : (
            <div class="tablewrap">
              <table class="list" aria-label="Team skills">
                <thead>
                  <tr>
                    <th>Skill</th>
                    <th>Factory</th>
                    <th>Loads</th>
                    <th>Runs</th>
                    <th>Last loaded</th>
                  </tr>
                </thead>
                <tbody>
                  {usage.data.skills.map((s) => (
                    <tr key={`${s.factory}/${s.path}`}>
                      <td>
                        {s.skill}
                        <div class="mono muted small-text">{s.path}</div>
                      </td>
                      <td>{s.factory}</td>
                      <td>{s.loads}</td>
                      <td>{s.runs}</td>
                      <td>
                        <Time iso={s.last_loaded_at} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <h2>Bundled skills</h2>
          <p class="muted small-text">
            Service-provided skills, grouped apart (never counted as the team’s).
          </p>
          {usage.data.bundled.length === 0 ? (
            <p class="muted">None loaded.</p>
          ) : (
            <ul class="plain">
              {usage.data.bundled.map((b) => (
                <li key={b.bundled_skill_id}>
                  <span class="mono">{b.bundled_skill_id}</span> — {b.loads} loads
                </li>
              ))}
            </ul>
          )}
          {usage.data.not_counted.outside_managed_roots > 0 && (
            <p class="muted small-text">
              {usage.data.not_counted.outside_managed_roots} loads of paths outside your managed skill roots
              were not counted.
            </p>
          )}
        </>
      )}
    </section>
  );
}

export function WorkersPage() {
  const workers = useLive(() => wire.call('connectedWorkers'), [], 5000);
  return (
    <section>
      <div class="pagehead">
        <h1>Self-hosted workers</h1>
      </div>
      <ErrorBox error={workers.error} />
      {!workers.data ? (
        <Loading />
      ) : workers.data.workers.length === 0 ? (
        <Empty title="No self-hosted worker connected">
          <p>
            Runs go to the service-hosted workers. To run on your own machine, make a worker key for it (a key
            with the scope <code>workers</code>, bound to one worker host; no other key can claim runs):
          </p>
          <CopyField
            label="Make a worker key"
            value={`npx factoryd api-keys create --team ${currentTeam()?.name ?? 'TEAM'} --scopes workers --worker-host ID`}
          />
          <p>then start the worker there with that key:</p>
          <CopyField
            label="Start a worker"
            value={`npx factoryd worker --worker-host ID --api ${location.origin} --api-key KEY`}
          />
          <p>
            and start runs with <code>{'"worker_host": "ID"'}</code> in their config.
          </p>
        </Empty>
      ) : (
        <div class="tablewrap">
          <table class="list" aria-label="Workers">
            <thead>
              <tr>
                <th>Worker host</th>
                <th>Connections</th>
                <th>Connected</th>
                <th>Last seen</th>
              </tr>
            </thead>
            <tbody>
              {workers.data.workers.map((w) => (
                <tr key={w.worker_host}>
                  <td class="mono">{w.worker_host}</td>
                  <td>{w.connection_count}</td>
                  <td>
                    <Time iso={w.connected_at} />
                  </td>
                  <td>
                    <Time iso={w.last_seen_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
