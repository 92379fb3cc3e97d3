import { Injectable } from '@nestjs/common';

/** The service's notion of now; injected so that time-dependent logic can be tested. */
@Injectable()
export class Clock {
  now(): Date {
    return new Date();
  }
}
