import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import pg from 'pg';
import { Database } from '../database/database.js';

export const DEFINITIONS_APPLIED_CHANNEL = 'factoryd_definitions_applied';

/** `factoryId` of the applied factory, or undefined after a reconnect (anything may have changed). */
export type AppliedListener = (factoryId: string | undefined) => void;

/**
 * Holds one dedicated connection that LISTENs for applies (the reconciler NOTIFYs with the factory
 * id after each apply commits), so every replica refreshes its webhook and trigger caches at once.
 * A lost connection reconnects and announces "everything" so nothing stays stale.
 */
@Injectable()
export class DefinitionsListener implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(DefinitionsListener.name);
  private readonly listeners: AppliedListener[] = [];
  private client?: pg.Client;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(@Inject(Database) private readonly db: Database) {}

  subscribe(listener: AppliedListener): void {
    this.listeners.push(listener);
  }

  async onModuleInit(): Promise<void> {
    await this.connect();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.db.pool.options);
    client.on('notification', (msg) => {
      if (msg.channel === DEFINITIONS_APPLIED_CHANNEL) this.emit(msg.payload || undefined);
    });
    client.on('error', (err) => {
      this.logger.warn(`definitions listener lost its connection: ${err.message}`);
      this.reconnect(client);
    });
    client.on('end', () => this.reconnect(client));
    await client.connect();
    await client.query(`LISTEN ${DEFINITIONS_APPLIED_CHANNEL}`);
    this.client = client;
  }

  private reconnect(old: pg.Client): void {
    if (this.stopped || this.client !== old) return;
    this.client = undefined;
    old.end().catch(() => undefined);
    this.scheduleConnect();
  }

  private scheduleConnect(): void {
    if (this.stopped) return;
    this.retry = setTimeout(() => {
      this.connect().then(
        () => this.emit(undefined),
        () => this.scheduleConnect(),
      );
    }, 1000);
    this.retry.unref();
  }

  private emit(factoryId: string | undefined): void {
    for (const l of this.listeners) l(factoryId);
  }
}
