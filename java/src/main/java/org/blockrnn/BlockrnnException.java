package org.blockrnn;

/**
 * A failure of the library other than bad input (which is an {@link IllegalArgumentException}):
 * the memory limit or the machine's resources exceeded, or an internal error. {@link #status()}
 * is the C API's status name ("ResourceExhausted", "Internal", "Unknown").
 */
public class BlockrnnException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  /** The C API's status name. */
  private final String status;

  /**
   * Creates the exception.
   *
   * @param status the status name
   * @param message the library's message
   */
  public BlockrnnException(String status, String message) {
    super(status + ": " + message);
    this.status = status;
  }

  /**
   * The status name.
   *
   * @return e.g. "ResourceExhausted"
   */
  public String status() {
    return status;
  }
}
