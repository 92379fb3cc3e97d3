import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';

/** What readiness asks of the database. */
@Injectable()
export class ReadinessRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** Whether a migration is still to be applied; throws when the database does not answer. */
  async migrationsPending(): Promise<boolean> {
    await this.db.query('SELECT 1');
    return this.db.dataSource.showMigrations();
  }
}
